// Transactional traffic from Kafka's own Java client, driven by a script on stdin (tests/support/java_traffic.py).
//
//   timeout MS       transaction.timeout.ms of the instances made from now on (60000 until set)
//   init NAME ID     a new producer instance NAME with transactional.id ID: InitProducerId
//   txn NAME [V]     begin, send one record (value V, "x" by default), commit; a fenced instance does
//                    what applications do: closes its producer, makes a new one with the same id,
//                    initialises it, retries
//   abort NAME [V]   begin, send one record, abort
//   open NAME [V]    begin, send one record, flush, leave the transaction open
//   commit NAME      commit the open transaction; prints "fenced NAME" instead of "ok" when the
//                    coordinator fenced the instance (it is then closed)
//   close NAME       close the instance (a clean shutdown; an open transaction stays open)
//   crash NAME       drop the instance without closing it (its transaction stays open)
//   sleep MS
//
// Prints "ok" after each line so the caller can follow along; exits 1 on the first unexpected error.
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.time.Duration;
import java.util.HashMap;
import java.util.Map;
import java.util.Properties;

import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.errors.InvalidProducerEpochException;
import org.apache.kafka.common.errors.ProducerFencedException;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public class TxnTraffic {
    static String bootstrap;
    static String topic;
    static final Map<String, KafkaProducer<byte[], byte[]>> producers = new HashMap<>();
    static final Map<String, String> ids = new HashMap<>();
    static String transactionTimeoutMs = "60000";

    static KafkaProducer<byte[], byte[]> create(String id) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("transactional.id", id);
        p.put("transaction.timeout.ms", transactionTimeoutMs);
        p.put("max.block.ms", "30000");
        KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(p, new ByteArraySerializer(), new ByteArraySerializer());
        producer.initTransactions();
        return producer;
    }

    static void send(KafkaProducer<byte[], byte[]> producer, String[] w) throws Exception {
        producer.beginTransaction();
        producer.send(new ProducerRecord<>(topic, 0, null, (w.length > 2 ? w[2] : "x").getBytes())).get();
    }

    static boolean fenced(Throwable e) {
        for (; e != null; e = e.getCause()) {
            if (e instanceof ProducerFencedException || e instanceof InvalidProducerEpochException) return true;
        }
        return false;
    }

    public static void main(String[] args) throws Exception {
        bootstrap = args[0];
        topic = args[1];
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        String line;
        while ((line = in.readLine()) != null) {
            String[] w = line.trim().split("\\s+");
            if (w.length == 0 || w[0].isEmpty()) continue;
            String answer = "ok ";
            switch (w[0]) {
                case "timeout":
                    transactionTimeoutMs = w[1];
                    break;
                case "commit":
                    try {
                        producers.get(w[1]).commitTransaction();
                    } catch (KafkaException e) {
                        if (!fenced(e)) throw e;
                        producers.remove(w[1]).close(Duration.ZERO);
                        answer = "fenced ";
                    }
                    break;
                case "init":
                    ids.put(w[1], w[2]);
                    producers.put(w[1], create(w[2]));
                    break;
                case "txn": {
                    try {
                        send(producers.get(w[1]), w);
                        producers.get(w[1]).commitTransaction();
                    } catch (Exception e) {  // fenced by the other holder of the id: start again, as applications do
                        producers.get(w[1]).close(Duration.ZERO);
                        KafkaProducer<byte[], byte[]> again = create(ids.get(w[1]));
                        producers.put(w[1], again);
                        send(again, w);
                        again.commitTransaction();
                    }
                    break;
                }
                case "abort":
                    send(producers.get(w[1]), w);
                    producers.get(w[1]).abortTransaction();
                    break;
                case "open":
                    send(producers.get(w[1]), w);
                    producers.get(w[1]).flush();
                    break;
                case "close":
                    producers.remove(w[1]).close(Duration.ofSeconds(30));
                    break;
                case "crash":
                    producers.remove(w[1]);  // never closed: what a killed process leaves behind
                    break;
                case "sleep":
                    Thread.sleep(Long.parseLong(w[1]));
                    break;
                default:
                    throw new IllegalArgumentException("unknown command: " + line);
            }
            System.out.println(answer + line);
            System.out.flush();
        }
        for (KafkaProducer<byte[], byte[]> p : producers.values()) p.close(Duration.ZERO);
        System.exit(0);
    }
}
