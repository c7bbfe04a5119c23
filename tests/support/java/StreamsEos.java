// An exactly-once Kafka Streams application on the streams rebalance protocol (KIP-1071):
// `java -cp kafka-streams' jars:. StreamsEos BOOTSTRAP APPLICATION_ID SOURCE SINK STATE_DIR`.
// Copies SOURCE to SINK (processing.guarantee=exactly_once_v2: it reads read_committed and commits its
// offsets in its transactions) as a member of the streams group APPLICATION_ID (group.protocol=streams).
// Prints "state NEW_STATE" on each state change and runs until its standard input closes.
import java.time.Duration;
import java.util.Properties;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;

public class StreamsEos {
    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, args[1]);
        props.put(StreamsConfig.STATE_DIR_CONFIG, args[4]);
        props.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
        props.put("group.protocol", "streams");
        props.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.ByteArraySerde.class);
        props.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.ByteArraySerde.class);
        props.put(StreamsConfig.consumerPrefix("auto.offset.reset"), "earliest");
        StreamsBuilder builder = new StreamsBuilder();
        builder.stream(args[2]).to(args[3]);
        KafkaStreams streams = new KafkaStreams(builder.build(), props);
        streams.setStateListener((now, before) -> {
            System.out.println("state " + now);
            System.out.flush();
        });
        streams.start();
        while (System.in.read() != -1) {
            // until the test closes our standard input
        }
        streams.close(Duration.ofSeconds(20));
        System.out.println("closed");
    }
}
