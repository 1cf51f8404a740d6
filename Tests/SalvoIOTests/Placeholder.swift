import Testing
@testable import SalvoIO

@Test func placeholder() { #expect(Bool(true)) }
