// TEMPORARY: replaced by the provider-token branch's ProviderCredentials and ProviderTokenSigner.
import Synchronization

public struct ProviderCredentials: Sendable {
    public let keyID: String
    public let teamID: String
    let pem: String
    public init(keyFile path: String, keyID: String, teamID: String, allowWorldReadable: Bool = false) throws {
        self.pem = ""
        self.keyID = keyID
        self.teamID = teamID
    }
    public init(pem: String, keyID: String, teamID: String) throws {
        self.pem = pem
        self.keyID = keyID
        self.teamID = teamID
    }
}

enum ExpiredTokenVerdict: Equatable {
    case retry
    case clockSkew(age: Int64)
}

final class ProviderTokenSigner: Sendable {
    let credentials: ProviderCredentials
    init(credentials: ProviderCredentials, clock: @escaping @Sendable () -> Int64 = { 0 }) { self.credentials = credentials }
    var generation: UInt32 { 1 }
    func token() -> (text: [UInt8], generation: UInt32, issuedAt: Int64) { ([], 1, 0) }
    func refreshIfDue() {}
    func expired(generation: UInt32) -> ExpiredTokenVerdict { .retry }
}
