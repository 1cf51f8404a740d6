internal import COpenSSL

/// SHA-256 through OpenSSL, for fingerprints (a checkpoint's campaign file), not secrets.
package enum SHA256 {
    /// The 32-byte digest of `parts`, hashed one after the other as if concatenated.
    package static func digest(_ parts: [UnsafeRawBufferPointer]) -> [UInt8] {
        guard let context = EVP_MD_CTX_new() else { fatalError("EVP_MD_CTX_new failed: out of memory") }
        defer { EVP_MD_CTX_free(context) }
        var digest = [UInt8](repeating: 0, count: 32)
        // These fail only without memory or with a broken OpenSSL: nothing a caller could handle.
        guard EVP_DigestInit_ex(context, EVP_sha256(), nil) == 1,
              parts.allSatisfy({ EVP_DigestUpdate(context, $0.baseAddress, $0.count) == 1 }),
              digest.withUnsafeMutableBufferPointer({ EVP_DigestFinal_ex(context, $0.baseAddress, nil) }) == 1
        else { fatalError("OpenSSL's SHA-256 failed") }
        return digest
    }
}
