"""The per-packet path and its transports: the handler (query bytes in, response bytes
out, from the zone's ready-made answers), the UDP and TCP servers, batched UDP I/O on
Linux, and the plain counters the path bumps."""
