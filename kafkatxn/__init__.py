"""kafkatxn: operations tooling for transactional Apache Kafka clusters."""

__version__ = "0.1.0"
