import Testing
@testable import SalvoWire

@Test func placeholder() { #expect(Bool(true)) }
