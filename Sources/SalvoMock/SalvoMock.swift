public enum SalvoMockModule {}
