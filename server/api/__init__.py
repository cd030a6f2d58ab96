"""HTTP blueprints: parse the request, call a service, shape the response."""
