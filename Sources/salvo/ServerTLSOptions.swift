import ArgumentParser
import Foundation
import SalvoIO
import SystemPackage
#if canImport(Glibc)
import Glibc
#endif

/// The server TLS flags of `salvo mock` (both protocols): the gateway's certificate, the CA
/// its clients' certificates must chain to, and the newest TLS version it offers. A client's
/// flags are another set: `TLSOptions`.
struct ServerTLSOptions: ParsableArguments {
    @Option(help: ArgumentHelp("Server certificate (PEM), followed by any intermediates.", valueName: "file"))
    var cert: String?

    @Option(help: ArgumentHelp("The server certificate's private key (PEM).", valueName: "file"))
    var key: String?

    @Option(help: ArgumentHelp("CA certificates (PEM) that client certificates must chain to.", valueName: "file"))
    var ca: String?

    @Flag(name: .customLong("require-client-cert"), help: "Refuse clients without a certificate issued by --ca.")
    var requireClientCertificate = false

    @Option(name: .customLong("tls"),
            help: ArgumentHelp("The newest TLS version offered: 1.2 (the binary default, as Apple's binary gateway: nothing but error responses follows the handshake) or 1.3 (the h2 default; it sends session tickets after the handshake).",
                               valueName: "version"))
    var tlsVersion: TLSVersion?

    /// Checks the flags that only go together.
    func check() throws(UsageError) {
        if cert == nil ? key != nil : key == nil {
            throw UsageError("--cert and --key go together: give both, or neither for throwaway certificates")
        }
        if requireClientCertificate && ca == nil && cert != nil {
            throw UsageError("--require-client-cert needs --ca, the CA that client certificates must chain to")
        }
    }

    /// The server's TLS setup from the flags, or from fresh throwaway certificates (written
    /// to a new temporary directory, named on standard error, and returned, for the caller
    /// to remove when the mock stops), offering `--tls` or else `defaultVersion`.
    func configuration(defaultVersion: TLSVersion) throws -> (TLSConfiguration, ThrowawayCertificates?) {
        var (configuration, throwaway) = try certificates()
        configuration.maximumVersion = tlsVersion ?? defaultVersion
        return (configuration, throwaway)
    }

    private func certificates() throws -> (TLSConfiguration, ThrowawayCertificates?) {
        if let cert, let key {
            var configuration = TLSConfiguration.server(certificateChain: .file(cert), privateKey: .file(key))
            if let ca {
                configuration.trustRoots = .certificates(.file(ca))
                configuration.verifyPeer = true
                configuration.requireClientCertificate = requireClientCertificate
            }
            return (configuration, nil)
        }
        let bundle = try DevelopmentPKI.Bundle()
        let directory = try Self.makeTemporaryDirectory()
        try bundle.write(to: directory)
        FileHandle.standardError.write(Data("""
            salvo mock: throwaway certificates in \(directory) (trust ca.pem; client.pem and client.key are a client identity)

            """.utf8))
        var configuration = TLSConfiguration.server(certificateChain: bundle.server.certificate,
                                                    privateKey: bundle.server.privateKey)
        if ca != nil || requireClientCertificate {
            configuration.trustRoots = .certificates(ca.map { .file($0) } ?? bundle.authority.certificate)
            configuration.verifyPeer = true
            configuration.requireClientCertificate = requireClientCertificate
        }
        return (configuration, ThrowawayCertificates(bundle: bundle, directory: directory))
    }

    private static func makeTemporaryDirectory() throws -> String {
        var template = Array("\(NSTemporaryDirectory())/salvo-mock-XXXXXX".utf8CString)
        guard let path = mkdtemp(&template) else {
            throw IOError("mkdtemp", errno: Errno(rawValue: errno), target: NSTemporaryDirectory())
        }
        return String(cString: path).replacingOccurrences(of: "//", with: "/")
    }
}

extension TLSVersion: ExpressibleByArgument {}

/// Certificates `salvo mock` made for one run, and the directory it wrote them to.
struct ThrowawayCertificates {
    let bundle: DevelopmentPKI.Bundle
    let directory: String

    /// Removes the directory: the certificates are worth nothing once the mock stops.
    func remove() { try? FileManager.default.removeItem(atPath: directory) }
}
