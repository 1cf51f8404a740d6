public enum SalvoWireModule {}
