"""Where the objects come from: manifest files (directory walk, bounded YAML parsing)
and the Kubernetes API (the client, discovery, reflectors, the watch, the locality of
the server, Warning Events on rejected objects), each converted from raw API dicts to
the model and handed to the zone's cache as lists of ops."""
