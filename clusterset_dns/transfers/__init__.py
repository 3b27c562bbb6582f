"""Zone transfers: consistent snapshots of the zone's records, the journal of zone
differences by serial, AXFR/IXFR with optional TSIG, and NOTIFY to secondaries."""
