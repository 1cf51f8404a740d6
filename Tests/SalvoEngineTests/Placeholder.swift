import Testing
@testable import SalvoEngine

@Test func placeholder() { #expect(Bool(true)) }
