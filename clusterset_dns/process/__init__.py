"""The process: the configuration and the command line, the lifespan (ordered
start-up and shutdown), worker processes, the clock, logging, health and Prometheus
metrics endpoints, and the offline operations (``dump``, ``explain``)."""
