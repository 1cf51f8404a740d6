// Intentionally empty: COpenSSLShims is header-only static inline wrappers.
