"""The zone and its answers: the model of the DNS-visible objects, the name rules and
the wire format, and the cache that admits objects and builds every answer (records,
truncated forms, negatives and their reasons, large-service deltas, the remembered
responses, the SOA serial) ahead of time, plus the decoder of stored answers. Pure
data and computation: it imports nothing from the other subpackages."""
