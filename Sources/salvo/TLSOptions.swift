import ArgumentParser
import Foundation
import SalvoIO
import SystemPackage
#if canImport(Glibc)
import Glibc
#endif

/// The client TLS flags shared by `salvo send` and `salvo feedback`.
///
/// APNs authenticates providers by their client certificate; the server is verified
/// against the system's CAs unless `--ca` names others (a private CA, the mock's).
struct TLSOptions: ParsableArguments {
    @Option(name: .customLong("cert"),
            help: ArgumentHelp("The provider certificate (PEM), followed by any intermediates.", valueName: "file"))
    var certificate: String?

    @Option(name: .customLong("key"),
            help: ArgumentHelp("The certificate's private key (PEM). Default: the --cert file, for combined PEMs.",
                               valueName: "file"))
    var privateKey: String?

    @Option(name: .customLong("passphrase-file"),
            help: ArgumentHelp("A file holding the private key's passphrase (one line).", valueName: "file"))
    var passphraseFile: String?

    @OptionGroup var trust: ServerTrustOptions

    /// `--ca`: the CA file the server is verified against instead of the system's.
    var trustedCertificates: String? { trust.trustedCertificates }
    /// `--insecure`: the server is not verified.
    var insecure: Bool { trust.insecure }

    @Flag(name: .customLong("allow-world-readable-key"),
          help: "Accept a private key file that other users can read (refused by default).")
    var allowWorldReadableKey = false

    func validate() throws {
        if privateKey != nil, certificate == nil {
            throw ValidationError("--key needs --cert: give the certificate the key belongs to")
        }
        if passphraseFile != nil, certificate == nil {
            throw ValidationError("--passphrase-file needs --cert and the key it unlocks")
        }
    }

    /// The client configuration these flags describe. Reads the passphrase file.
    func configuration() throws -> TLSConfiguration {
        var configuration = TLSConfiguration.client(
            certificateChain: certificate.map(PEMSource.file),
            privateKey: (privateKey ?? certificate).map(PEMSource.file),
            passphrase: try passphraseFile.map(Self.readPassphrase),
            trustRoots: trustedCertificates.map { .certificates(.file($0)) } ?? .system)
        configuration.verifyPeer = !insecure
        configuration.allowWorldReadableKey = allowWorldReadableKey
        return configuration
    }

    /// Builds the client context, warning on stderr (for `command`) when verification is off.
    func makeContext(command: String) throws -> TLSContext {
        if insecure {
            printError("salvo \(command): warning: TLS verification is OFF: the server's certificate and name are not checked, so anyone on the network path can pose as it. Use --ca to trust a private CA instead.")
        }
        return try TLSContext(try configuration(), role: .client)
    }

    /// The file's first line; the line ending is not part of the passphrase.
    static func readPassphrase(_ path: String) throws -> String {
        let bytes = try readWholeFile(path, limit: 4096, what: "passphrase file")
        let text = String(decoding: bytes, as: UTF8.self)
        return String(text.prefix { $0 != "\n" && $0 != "\r\n" && $0 != "\r" })
    }
}

/// How the server's certificate is checked: `--ca` and `--insecure`, the TLS flags of every
/// client, also those that present no certificate of their own (`salvo check-token`).
struct ServerTrustOptions: ParsableArguments {
    @Option(name: .customLong("ca"),
            help: ArgumentHelp("Trust these CA certificates (PEM) instead of the system's.", valueName: "file"))
    var trustedCertificates: String?

    @Flag(help: "Do not verify the server's certificate or name. For development only.")
    var insecure = false

    func validate() throws {
        if insecure, trustedCertificates != nil {
            throw ValidationError("--ca and --insecure contradict each other: --ca verifies against a CA, --insecure verifies nothing")
        }
    }
}

/// Refuses a directory given where a file is read (a campaign, a token list, a payload):
/// reading one fails only later, in the middle of a run. What does not exist is left for
/// the open to report.
func refuseDirectory(_ path: String?, flag: String) throws {
    var isDirectory: ObjCBool = false
    guard let path, FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory), isDirectory.boolValue else { return }
    throw ValidationError("\(flag) \(path) is a directory; give a file")
}

/// Why a file given on the command line could not be read.
struct FileInputError: Error, CustomStringConvertible {
    var description: String
}

/// Reads a small file given on the command line, refusing anything over `limit` bytes.
func readWholeFile(_ path: String, limit: Int, what: String) throws -> [UInt8] {
    do {
        return try readSmallFile(path, limit: limit)
    } catch where error.errno == .fileTooLarge {
        throw FileInputError(description: "the \(what) \(path) is larger than \(limit) bytes")
    } catch {
        throw FileInputError(description: "cannot \(error.operation) the \(what) \(path): \(error.errno)")
    }
}
