public enum SalvoEngineModule {}
