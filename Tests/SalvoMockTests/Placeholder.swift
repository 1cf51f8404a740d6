import Testing
@testable import SalvoMock

@Test func placeholder() { #expect(Bool(true)) }
