"""metaplane: the metadata and coordination plane of a pub/sub cluster."""

__version__ = "0.1.0"
