// What Kafka's tools make of --command-config files: java.util.Properties.load(InputStream), as
// org.apache.kafka.common.utils.Utils.loadProps calls it (ISO-8859-1), and, for sasl.jaas.config,
// the options Kafka's JAAS parser reads. Used by tests/unit/test_properties_java_parity.py:
//
//   java -cp "$HOME/.cache/kafkatxn/kafka-4.4.0/libs/*" tests/unit/vectors/PropertiesDump.java FILE...
//
// Output per file: "F <path>", then "E <key> <value>" per entry (sorted), "X" when load() refused the
// file, and "J <username> <password>" or "JX" for a sasl.jaas.config. Strings are hex of UTF-16BE ("-": empty).
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.HashMap;
import java.util.Map;
import java.util.Properties;
import java.util.TreeSet;

import org.apache.kafka.common.config.types.Password;
import org.apache.kafka.common.security.JaasContext;

public class PropertiesDump {
    static String hex(String s) {
        StringBuilder b = new StringBuilder();
        for (byte x : s.getBytes(StandardCharsets.UTF_16BE)) b.append(String.format("%02x", x));
        return b.length() == 0 ? "-" : b.toString();
    }

    public static void main(String[] args) throws Exception {
        for (String path : args) {
            System.out.println("F " + path);
            Properties p = new Properties();
            try (InputStream in = Files.newInputStream(Paths.get(path))) {
                p.load(in);
            } catch (IllegalArgumentException e) {  // malformed \\uxxxx encoding
                System.out.println("X");
                continue;
            }
            for (String k : new TreeSet<>(p.stringPropertyNames())) System.out.println("E " + hex(k) + " " + hex(p.getProperty(k)));
            String jaas = p.getProperty("sasl.jaas.config");
            if (jaas != null) {
                try {
                    Map<String, Object> configs = new HashMap<>();
                    configs.put("sasl.jaas.config", new Password(jaas.trim()));  // ConfigDef trims PASSWORD values
                    Map<String, ?> o = JaasContext.loadClientContext(configs).configurationEntries().get(0).getOptions();
                    System.out.println("J " + hex(String.valueOf(o.get("username"))) + " " + hex(String.valueOf(o.get("password"))));
                } catch (RuntimeException e) {
                    System.out.println("JX");
                }
            }
        }
    }
}
