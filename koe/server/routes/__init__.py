"""The server's endpoints, one module per resource."""
