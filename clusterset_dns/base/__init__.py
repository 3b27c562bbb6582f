"""What every subsystem above the zone uses: the clock, the frozen Config and the
metric declarations. Imports only ``zone``; imported by sources, transfers and process."""
