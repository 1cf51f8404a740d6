import SalvoWire

/// One of the four channel management operations, with what it names.
package enum ChannelOperation: Sendable, Hashable {
    case create(MessageStoragePolicy)
    case read(channelID: String)
    case delete(channelID: String)
    case list

    /// `create`, `read`, `delete`, `list`: what errors call the request.
    package var name: String {
        switch self {
        case .create: "create"
        case .read: "read"
        case .delete: "delete"
        case .list: "list"
        }
    }

    /// The channel the request names, for read and delete.
    package var channelID: String? {
        switch self {
        case .read(let id), .delete(let id): id
        case .create, .list: nil
        }
    }
}

/// A channel management request as it goes on the wire, built without I/O.
///
/// The channel id travels in the `apns-channel-id` header, never in the path (APNSwift's
/// first version put it there, and APNs answers that with 404); list has its own path,
/// `all-channels`.
package struct ChannelRequest: Sendable, Hashable {
    /// A header field, in the order written.
    package struct Field: Sendable, Hashable {
        package var name: String
        package var value: String
    }

    /// `POST`, `GET` or `DELETE`.
    package var method: String
    /// `/1/apps/<bundle id>/channels` or `/1/apps/<bundle id>/all-channels`.
    package var path: String
    /// `apns-request-id`, `authorization` (token authentication), `apns-channel-id` (read,
    /// delete), `content-type` (create).
    package var fields: [Field]
    /// The create request's JSON; nil for the others.
    package var body: [UInt8]?

    /// The `push-type` of a channel's create request, as Apple's page spells it.
    package static let livePushType = "LiveActivity"

    /// The request for `operation` on `bundleID`'s channels, named by `requestID`, with the
    /// provider token's `authorization` value (`bearer <JWT>`) unless certificates authenticate.
    ///
    /// - Throws: `.invalidRequest` for a bundle id or channel id that cannot go in a path
    ///   or header, before anything is sent.
    package init(_ operation: ChannelOperation, bundleID: String, requestID: String,
                 authorization: String?) throws(ChannelRequestProblem) {
        try Self.check(bundleID: bundleID)
        let apps = "/1/apps/\(bundleID)"
        fields = [Field(name: "apns-request-id", value: requestID)]
        if let authorization { fields.append(Field(name: "authorization", value: authorization)) }
        switch operation {
        case .create(let policy):
            method = "POST"
            path = apps + "/channels"
            fields.append(Field(name: "content-type", value: "application/json"))
            body = Array(#"{"message-storage-policy":\#(policy.rawValue),"push-type":"\#(Self.livePushType)"}"#.utf8)
        case .read(let id), .delete(let id):
            try Self.check(channelID: id)
            method = operation == .read(channelID: id) ? "GET" : "DELETE"
            path = apps + "/channels"
            fields.append(Field(name: "apns-channel-id", value: id))
            body = nil
        case .list:
            method = "GET"
            path = apps + "/all-channels"
            body = nil
        }
    }

    /// A bundle id goes in the path as it is: letters, digits, `.` and `-` (Apple's rule),
    /// and `_`, which some old ids hold; anything else would change the path's meaning.
    private static func check(bundleID: String) throws(ChannelRequestProblem) {
        guard !bundleID.isEmpty else { throw .bundleID("the bundle id is empty") }
        let allowed = bundleID.unicodeScalars.allSatisfy {
            $0.isASCII && ($0.properties.isAlphabetic || ("0"..."9").contains($0) || $0 == "." || $0 == "-" || $0 == "_")
        }
        guard allowed else {
            throw .bundleID("the bundle id '\(bundleID)' holds characters other than letters, digits, '.', '-' and '_'")
        }
    }

    /// A channel id is base64 of no fixed length: printable ASCII without spaces is all a
    /// header needs, and APNs judges the rest (BadChannelId).
    private static func check(channelID: String) throws(ChannelRequestProblem) {
        guard !channelID.isEmpty else { throw .channelID("the channel id is empty") }
        guard channelID.unicodeScalars.allSatisfy({ (0x21...0x7E).contains($0.value) }) else {
            throw .channelID("the channel id holds a space or a character other than printable ASCII; APNs's ids are base64")
        }
    }
}

/// Why a request cannot be built: the text says which value and what is wrong.
package enum ChannelRequestProblem: Error, Sendable, Hashable, CustomStringConvertible {
    case bundleID(String)
    case channelID(String)

    package var description: String {
        switch self {
        case .bundleID(let text), .channelID(let text): text
        }
    }
}
