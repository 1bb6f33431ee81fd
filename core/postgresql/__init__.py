"""Django's PostgreSQL backend, its connection pool checking a connection by its socket."""
