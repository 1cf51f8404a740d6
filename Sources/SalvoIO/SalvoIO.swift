public enum SalvoIOModule {}
