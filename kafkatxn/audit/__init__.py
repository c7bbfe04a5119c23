"""Offline audit of Kafka's transaction state: decoders for the internal ``__transaction_state`` log."""
