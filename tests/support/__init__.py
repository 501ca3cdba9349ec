"""Test support: loopback servers, mini catalogs, test layers and the shared-data path."""
