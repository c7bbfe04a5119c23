// Golden vectors for kafkatxn.kafka.txnlog, written and read by Apache Kafka's own code.
//
// The bytes come from Kafka's generated TransactionLogKey/TransactionLogValue classes and
// MessageUtil.toVersionPrefixedBytes, i.e. exactly what TransactionLog.keyToBytes/valueToBytes
// put on __transaction_state. Needs the Kafka 4.x jars (4.3.1 and 4.4.0 checked):
//
//   CP=kafka-clients-4.4.0.jar:kafka-transaction-coordinator-4.4.0.jar:kafka-server-common-4.4.0.jar:kafka-coordinator-common-4.4.0.jar
//   java -cp "$CP" tests/unit/vectors/GenTxnLogVectors.java generate 4.4.0 > tests/unit/vectors/kafka_txnlog_vectors.json
//   python -c '...encode with kafkatxn...' | java -cp "$CP" tests/unit/vectors/GenTxnLogVectors.java read
//
// "generate" prints the JSON vector file that tests/unit/test_txnlog_decoder.py checks.
// "read" takes one hex value per line on stdin and prints what Kafka decodes from it, one JSON
// object per line, so that bytes made by the Python encoder can be checked against Kafka.

import org.apache.kafka.common.protocol.ByteBufferAccessor;
import org.apache.kafka.common.protocol.MessageUtil;
import org.apache.kafka.common.protocol.types.RawTaggedField;
import org.apache.kafka.coordinator.transaction.generated.TransactionLogKey;
import org.apache.kafka.coordinator.transaction.generated.TransactionLogValue;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.stream.Collectors;

public class GenTxnLogVectors {
    static final HexFormat HEX = HexFormat.of();

    static String key(String tid) {
        return HEX.formatHex(MessageUtil.toVersionPrefixedBytes((short) 0, new TransactionLogKey().setTransactionalId(tid)));
    }

    static TransactionLogValue.PartitionsSchema ps(String topic, Integer... ids) {
        return new TransactionLogValue.PartitionsSchema().setTopic(topic).setPartitionIds(List.of(ids));
    }

    static String q(String s) {
        StringBuilder b = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            if (c == '"' || c == '\\') b.append('\\').append(c);
            else if (c < 0x20 || c > 0x7e) b.append(String.format("\\u%04x", (int) c));
            else b.append(c);
        }
        return b.append('"').toString();
    }

    static String vector(String name, String tid, short version, TransactionLogValue v, String expected) {
        String value = HEX.formatHex(MessageUtil.toVersionPrefixedBytes(version, v));
        return "    {\"name\": " + q(name) + ", \"key\": " + q(key(tid)) + ", \"value\": " + q(value)
            + ", \"expected\": " + expected + "}";
    }

    static String partitionsJson(List<String> tps) {
        return tps.stream().sorted().map(GenTxnLogVectors::q).collect(Collectors.joining(", ", "[", "]"));
    }

    static String expected(String tid, int version, long pid, int epoch, String state, List<String> tps, int timeout,
                           long start, long last, int ctv, long prev, long next, int nextEpoch) {
        return "{\"transactional_id\": " + q(tid) + ", \"value_version\": " + version + ", \"producer_id\": " + pid
            + ", \"producer_epoch\": " + epoch + ", \"state\": " + q(state) + ", \"partitions\": " + partitionsJson(tps)
            + ", \"timeout_ms\": " + timeout + ", \"start_timestamp_ms\": " + start + ", \"last_update_timestamp_ms\": " + last
            + ", \"client_transaction_version\": " + ctv + ", \"previous_producer_id\": " + prev
            + ", \"next_producer_id\": " + next + ", \"next_producer_epoch\": " + nextEpoch + "}";
    }

    static void generate(String kafkaVersion) {
        List<String> out = new ArrayList<>();
        long t0 = 1_700_000_000_000L;

        // v0, Ongoing, two topics.
        TransactionLogValue v = new TransactionLogValue().setProducerId(1000).setProducerEpoch((short) 5)
            .setTransactionTimeoutMs(60000).setTransactionStatus((byte) 1)
            .setTransactionPartitions(List.of(ps("orders", 0, 3), ps("pay", 10)))
            .setTransactionLastUpdateTimestampMs(t0 + 500).setTransactionStartTimestampMs(t0);
        out.add(vector("v0_ongoing", "tx-1", (short) 0, v,
            expected("tx-1", 0, 1000, 5, "Ongoing", List.of("orders-0", "orders-3", "pay-10"), 60000, t0, t0 + 500, 0, -1, -1, -1)));

        // v0, Empty: Kafka writes a null partition array for Empty.
        v = new TransactionLogValue().setProducerId(7).setProducerEpoch((short) 0)
            .setTransactionTimeoutMs(900000).setTransactionStatus((byte) 0).setTransactionPartitions(null)
            .setTransactionLastUpdateTimestampMs(t0).setTransactionStartTimestampMs(-1);
        out.add(vector("v0_empty_null_partitions", "spark-app-0", (short) 0, v,
            expected("spark-app-0", 0, 7, 0, "Empty", List.of(), 900000, -1, t0, 0, -1, -1, -1)));

        // v1, all four known tagged fields set (TV2 coordinator mid epoch rotation).
        v = new TransactionLogValue().setProducerId(1000).setProducerEpoch((short) 5)
            .setTransactionTimeoutMs(60000).setTransactionStatus((byte) 2)
            .setTransactionPartitions(List.of(ps("orders", 0, 3), ps("pay", 10)))
            .setTransactionLastUpdateTimestampMs(t0 + 500).setTransactionStartTimestampMs(t0)
            .setPreviousProducerId(999).setNextProducerId(1001).setClientTransactionVersion((short) 2)
            .setNextProducerEpoch((short) 0);
        out.add(vector("v1_prepare_commit_all_tags", "tx-1", (short) 1, v,
            expected("tx-1", 1, 1000, 5, "PrepareCommit", List.of("orders-0", "orders-3", "pay-10"), 60000, t0, t0 + 500, 2, 999, 1001, 0)));

        // v1, Empty, typical TV2 record: null partitions, only ClientTransactionVersion.
        v = new TransactionLogValue().setProducerId(42).setProducerEpoch((short) 3)
            .setTransactionTimeoutMs(60000).setTransactionStatus((byte) 0).setTransactionPartitions(null)
            .setTransactionLastUpdateTimestampMs(t0).setTransactionStartTimestampMs(-1)
            .setClientTransactionVersion((short) 2);
        out.add(vector("v1_empty_tv2", "tx-empty", (short) 1, v,
            expected("tx-empty", 1, 42, 3, "Empty", List.of(), 60000, -1, t0, 2, -1, -1, -1)));

        // v1 with every tagged field at its default: no tags on the wire.
        v = new TransactionLogValue().setProducerId(42).setProducerEpoch((short) 4)
            .setTransactionTimeoutMs(60000).setTransactionStatus((byte) 4).setTransactionPartitions(List.of())
            .setTransactionLastUpdateTimestampMs(t0 + 9).setTransactionStartTimestampMs(t0);
        out.add(vector("v1_complete_commit_empty_array_no_tags", "tx-empty", (short) 1, v,
            expected("tx-empty", 1, 42, 4, "CompleteCommit", List.of(), 60000, t0, t0 + 9, 0, -1, -1, -1)));

        // v1 with multi-byte varints: a 200-character topic and 150 partitions, extreme ids.
        String longTopic = "t".repeat(200);
        List<Integer> many = new ArrayList<>();
        List<String> manyTps = new ArrayList<>();
        for (int i = 0; i < 150; i++) {
            many.add(i);
            manyTps.add(longTopic + "-" + i);
        }
        manyTps.add("x-2147483647");
        v = new TransactionLogValue().setProducerId(Long.MAX_VALUE).setProducerEpoch(Short.MAX_VALUE)
            .setTransactionTimeoutMs(Integer.MAX_VALUE).setTransactionStatus((byte) 7)
            .setTransactionPartitions(List.of(
                new TransactionLogValue.PartitionsSchema().setTopic(longTopic).setPartitionIds(many),
                ps("x", Integer.MAX_VALUE)))
            .setTransactionLastUpdateTimestampMs(Long.MAX_VALUE).setTransactionStartTimestampMs(Long.MIN_VALUE)
            .setPreviousProducerId(Long.MIN_VALUE).setNextProducerEpoch(Short.MIN_VALUE)
            .setClientTransactionVersion((short) 1);
        out.add(vector("v1_long_varints_extremes", "tx-\u00e9\u6f22", (short) 1, v,
            expected("tx-\u00e9\u6f22", 1, Long.MAX_VALUE, Short.MAX_VALUE, "PrepareEpochFence", manyTps, Integer.MAX_VALUE,
                Long.MIN_VALUE, Long.MAX_VALUE, 1, Long.MIN_VALUE, -1, Short.MIN_VALUE)));

        // v1 with tags this schema does not know, on the value and on a partition entry
        // (a future broker's fields): Kafka keeps them as raw tagged fields; readers must skip them.
        TransactionLogValue.PartitionsSchema p = ps("orders", 1);
        p.unknownTaggedFields().add(new RawTaggedField(100, "foo".getBytes(StandardCharsets.UTF_8)));
        v = new TransactionLogValue().setProducerId(5000).setProducerEpoch((short) 9)
            .setTransactionTimeoutMs(10000).setTransactionStatus((byte) 3).setTransactionPartitions(List.of(p))
            .setTransactionLastUpdateTimestampMs(t0 + 2).setTransactionStartTimestampMs(t0 + 1)
            .setClientTransactionVersion((short) 2).setNextProducerId(5001);
        v.unknownTaggedFields().add(new RawTaggedField(4, new byte[] {0, 7}));
        v.unknownTaggedFields().add(new RawTaggedField(300, new byte[130]));
        out.add(vector("v1_unknown_tags_skipped", "tx-future", (short) 1, v,
            expected("tx-future", 1, 5000, 9, "PrepareAbort", List.of("orders-1"), 10000, t0 + 1, t0 + 2, 2, -1, 5001, -1)));

        System.out.println("{");
        System.out.println("  \"generator\": \"tests/unit/vectors/GenTxnLogVectors.java\",");
        System.out.println("  \"kafka_version\": " + q(kafkaVersion) + ",");
        System.out.println("  \"vectors\": [");
        System.out.println(String.join(",\n", out));
        System.out.println("  ]");
        System.out.println("}");
    }

    static void read() throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            line = line.trim();  // an empty line is an empty value: Kafka fails on it too
            try {
                ByteBuffer buf = ByteBuffer.wrap(HEX.parseHex(line));
                short version = buf.getShort();
                TransactionLogValue v = new TransactionLogValue(new ByteBufferAccessor(buf), version);
                List<String> tps = new ArrayList<>();
                if (v.transactionPartitions() != null) {
                    for (TransactionLogValue.PartitionsSchema ps : v.transactionPartitions()) {
                        for (int id : ps.partitionIds()) tps.add(ps.topic() + "-" + id);
                    }
                }
                String unknown = v.unknownTaggedFields().stream().map(f -> Integer.toString(f.tag()))
                    .collect(Collectors.joining(", ", "[", "]"));
                System.out.println("{\"value_version\": " + version + ", \"producer_id\": " + v.producerId()
                    + ", \"producer_epoch\": " + v.producerEpoch() + ", \"status\": " + v.transactionStatus()
                    + ", \"partitions\": " + partitionsJson(tps) + ", \"timeout_ms\": " + v.transactionTimeoutMs()
                    + ", \"start_timestamp_ms\": " + v.transactionStartTimestampMs()
                    + ", \"last_update_timestamp_ms\": " + v.transactionLastUpdateTimestampMs()
                    + ", \"client_transaction_version\": " + v.clientTransactionVersion()
                    + ", \"previous_producer_id\": " + v.previousProducerId() + ", \"next_producer_id\": " + v.nextProducerId()
                    + ", \"next_producer_epoch\": " + v.nextProducerEpoch() + ", \"unknown_tags\": " + unknown
                    + ", \"remaining\": " + buf.remaining() + "}");
            } catch (Exception e) {
                System.out.println("{\"error\": " + q(e.getClass().getSimpleName() + ": " + e.getMessage()) + "}");
            }
        }
    }

    public static void main(String[] args) throws Exception {
        if (args.length >= 1 && args[0].equals("generate")) {
            generate(args.length >= 2 ? args[1] : "unknown");
        } else if (args.length == 1 && args[0].equals("read")) {
            read();
        } else {
            System.err.println("usage: GenTxnLogVectors generate KAFKA_VERSION | read");
            System.exit(64);
        }
    }
}
