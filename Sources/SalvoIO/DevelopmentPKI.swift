internal import COpenSSL
internal import COpenSSLShims
import SystemPackage
#if canImport(Glibc)
import Glibc
#endif

/// Throwaway certificates for development, tests and the mock server, made in-process
/// with OpenSSL (P-256 keys, SHA-256 signatures). Never for production.
///
/// `scripts/certs.sh` makes the same set with the openssl command line for people who
/// want files to look at.
public enum DevelopmentPKI {
    /// A certificate and its private key, both PEM.
    public struct Identity: Sendable {
        public var certificatePEM: String
        /// The private key. Keep it out of logs.
        public var privateKeyPEM: String

        public var certificate: PEMSource { .text(certificatePEM) }
        public var privateKey: PEMSource { .text(privateKeyPEM) }
    }

    /// What a certificate is for.
    public enum Usage: Sendable {
        case certificateAuthority
        case server
        case client
    }

    /// A P-256 private key in PKCS#8 PEM: what an APNs signing key (`AuthKey_<KEYID>.p8`)
    /// holds, for provider tokens in tests and the demo.
    public static func makeSigningKey() throws(TLSError) -> String {
        ERR_clear_error()
        guard let key = salvo_EVP_EC_gen_P256() else { throw failure("generating a key") }
        defer { EVP_PKEY_free(key) }
        return try pem { PEM_write_bio_PrivateKey($0, key, nil, nil, 0, nil, nil) }
    }

    /// A self-signed certificate authority.
    public static func makeAuthority(commonName: String = "Salvo Development CA") throws(TLSError) -> Identity {
        try make(subject: [("CN", commonName), ("O", "Salvo development")], usage: .certificateAuthority,
                 subjectAlternativeNames: [], issuer: nil)
    }

    /// A server certificate for `localhost`, `127.0.0.1` and `::1` (plus `extraNames`).
    public static func makeServer(
        issuer: Identity, commonName: String = "localhost", extraNames: [String] = [],
        validFrom: Duration = .seconds(-3600), validFor: Duration = .seconds(86400 * 365)
    ) throws(TLSError) -> Identity {
        let names = ["DNS:localhost", "IP:127.0.0.1", "IP:::1"] + extraNames.map { name in
            name.contains(":") || name.allSatisfy({ $0.isNumber || $0 == "." }) ? "IP:\(name)" : "DNS:\(name)"
        }
        return try make(subject: [("CN", commonName)], usage: .server, subjectAlternativeNames: names, issuer: issuer,
                        validFrom: validFrom, validFor: validFor)
    }

    /// A client certificate whose subject looks like Apple's push certificates
    /// (`UID=<topic>, CN=Apple Push Services: <topic>, OU=<team>, O=<org>, C=US`).
    public static func makeClient(
        issuer: Identity, topic: String = "com.example.salvo", team: String = "SALVO00000",
        validFrom: Duration = .seconds(-3600), validFor: Duration = .seconds(86400 * 365)
    ) throws(TLSError) -> Identity {
        try make(subject: [("UID", topic), ("CN", "Apple Push Services: \(topic)"), ("OU", team),
                           ("O", "Salvo Development"), ("C", "US")],
                 usage: .client, subjectAlternativeNames: [], issuer: issuer,
                 validFrom: validFrom, validFor: validFor)
    }

    /// A CA, a server and a client identity in one go: what tests and `salvo mock` need.
    public struct Bundle: Sendable {
        public var authority: Identity
        public var server: Identity
        public var client: Identity

        /// - Parameter serverNames: names or addresses the server certificate holds besides
        ///   `localhost`, `127.0.0.1` and `::1`.
        public init(serverNames: [String] = []) throws(TLSError) {
            authority = try DevelopmentPKI.makeAuthority()
            server = try DevelopmentPKI.makeServer(issuer: authority, extraNames: serverNames)
            client = try DevelopmentPKI.makeClient(issuer: authority)
        }

        /// Writes `ca.pem`, `server.pem`, `server.key`, `client.pem`, `client.key` into
        /// `directory` (created if missing); keys are mode 0600.
        public func write(to directory: String) throws(IOError) {
            _ = mkdir(directory, 0o700)
            try writeFile("\(directory)/ca.pem", authority.certificatePEM, mode: 0o644)
            try writeFile("\(directory)/server.pem", server.certificatePEM, mode: 0o644)
            try writeFile("\(directory)/server.key", server.privateKeyPEM, mode: 0o600)
            try writeFile("\(directory)/client.pem", client.certificatePEM, mode: 0o644)
            try writeFile("\(directory)/client.key", client.privateKeyPEM, mode: 0o600)
        }
    }

    private static func make(
        subject: [(String, String)], usage: Usage, subjectAlternativeNames: [String], issuer: Identity?,
        validFrom: Duration = .seconds(-3600), validFor: Duration = .seconds(86400 * 3650)
    ) throws(TLSError) -> Identity {
        ERR_clear_error()
        guard let key = salvo_EVP_EC_gen_P256() else { throw failure("generating a key") }
        defer { EVP_PKEY_free(key) }
        guard let certificate = X509_new() else { throw failure("allocating a certificate") }
        defer { X509_free(certificate) }

        X509_set_version(certificate, 2)
        var serial = [UInt8](repeating: 0, count: 16)
        _ = RAND_bytes(&serial, Int32(serial.count))
        serial[0] &= 0x7f
        let serialNumber = BN_bin2bn(serial, Int32(serial.count), nil)
        BN_to_ASN1_INTEGER(serialNumber, X509_get_serialNumber(certificate))
        BN_free(serialNumber)

        let start = Int(validFrom.components.seconds)
        X509_gmtime_adj(X509_getm_notBefore(certificate), start)
        X509_gmtime_adj(X509_getm_notAfter(certificate), start + Int(validFor.components.seconds))

        let name = X509_get_subject_name(certificate)
        for (field, value) in subject {
            X509_NAME_add_entry_by_txt(name, field, MBSTRING_UTF8, value, -1, -1, 0)
        }
        X509_set_pubkey(certificate, key)

        // The issuer: ourselves for a CA, else the given authority.
        var issuerCertificate: OpaquePointer? = nil
        var issuerKey: OpaquePointer? = nil
        defer {
            if let issuerCertificate { X509_free(issuerCertificate) }
            if let issuerKey { EVP_PKEY_free(issuerKey) }
        }
        if let issuer {
            issuerCertificate = try TLSContext.readCertificates(issuer.certificate, what: "issuer").first
            issuerKey = issuer.privateKeyPEM.withCString { text -> OpaquePointer? in
                let bio = BIO_new_mem_buf(text, -1)
                defer { BIO_free(bio) }
                return PEM_read_bio_PrivateKey(bio, nil, nil, nil)
            }
            guard issuerCertificate != nil, issuerKey != nil else { throw failure("reading the issuer") }
            X509_set_issuer_name(certificate, X509_get_subject_name(issuerCertificate))
        } else {
            X509_set_issuer_name(certificate, name)
        }

        var extensions: [(Int32, String)] = [(NID_subject_key_identifier, "hash")]
        switch usage {
        case .certificateAuthority:
            extensions += [(NID_basic_constraints, "critical,CA:TRUE"), (NID_key_usage, "critical,keyCertSign,cRLSign")]
        case .server:
            extensions += [(NID_basic_constraints, "critical,CA:FALSE"), (NID_key_usage, "critical,digitalSignature"),
                           (NID_ext_key_usage, "serverAuth")]
        case .client:
            extensions += [(NID_basic_constraints, "critical,CA:FALSE"), (NID_key_usage, "critical,digitalSignature"),
                           (NID_ext_key_usage, "clientAuth")]
        }
        if issuer != nil { extensions.append((NID_authority_key_identifier, "keyid:always")) }
        if !subjectAlternativeNames.isEmpty {
            extensions.append((NID_subject_alt_name, subjectAlternativeNames.joined(separator: ",")))
        }
        var context = X509V3_CTX()
        X509V3_set_ctx(&context, issuerCertificate ?? certificate, certificate, nil, nil, 0)
        for (nid, value) in extensions {
            guard let ext = X509V3_EXT_conf_nid(nil, &context, nid, value) else {
                throw failure("adding extension \(value)")
            }
            X509_add_ext(certificate, ext, -1)
            X509_EXTENSION_free(ext)
        }

        guard X509_sign(certificate, issuerKey ?? key, EVP_sha256()) > 0 else { throw failure("signing") }

        return Identity(
            certificatePEM: try pem { PEM_write_bio_X509($0, certificate) },
            privateKeyPEM: try pem { PEM_write_bio_PrivateKey($0, key, nil, nil, 0, nil, nil) })
    }

    private static func pem(_ write: (OpaquePointer) -> Int32) throws(TLSError) -> String {
        guard let bio = BIO_new(BIO_s_mem()) else { throw failure("allocating a buffer") }
        defer { BIO_free(bio) }
        guard write(bio) == 1 else { throw failure("writing PEM") }
        var data: UnsafeMutablePointer<CChar>?
        let length = salvo_BIO_get_mem_data(bio, &data)
        guard let data, length > 0 else { throw failure("reading PEM") }
        return String(decoding: UnsafeRawBufferPointer(start: data, count: length), as: UTF8.self)
    }

    private static func failure(_ step: String) -> TLSError {
        TLSError(.configuration, subject: "development certificate", reason: "\(step): \(TLSError.drainErrorQueue())")
    }
}

/// Writes `text` to `path` with `mode`, replacing the file.
func writeFile(_ path: String, _ text: String, mode: mode_t) throws(IOError) {
    let fd = try FileDescriptor.open(path: path, .writeOnly, options: [.create, .truncate],
                                     permissions: FilePermissions(rawValue: mode))
    defer { try? fd.close() }
    // open's mode applies to a new file only (and through the umask): set it on an old one too.
    fchmod(fd.rawValue, mode)
    try fd.writeAll(text, target: path)
}
