internal import CNghttp2
import SalvoIO

/// What a `ClientSession` reports from inside nghttp2's callbacks. Streams are named by the
/// slot the connection gave them when it submitted them (`StreamWindow`'s slot numbers).
protocol ClientSessionDelegate: AnyObject {
    /// A response header of a stream (`:status`, `apns-id`, …).
    func responseHeader(slot: Int32, name: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer)
    /// A piece of a response body.
    func responseBody(slot: Int32, chunk: UnsafeRawBufferPointer)
    /// The stream ended: answered (its response is complete), reset by the gateway, or
    /// refused (`refused`: REFUSED_STREAM, or above a GOAWAY's last stream id: never processed).
    func streamClosed(slot: Int32, refused: Bool, errorCode: UInt32)
    /// A request the session could not send (it is not opened: never processed).
    func requestNotSent(slot: Int32)
    /// Copies the next bytes of a request body into `destination`; returns how many, and
    /// whether the body ends with them.
    func requestBody(slot: Int32, into destination: UnsafeMutableRawBufferPointer) -> (count: Int, isLast: Bool)
    /// GOAWAY: streams up to `lastStreamID` are answered; later ones were refused.
    func goAway(lastStreamID: Int32, errorCode: UInt32, debugData: UnsafeRawBufferPointer)
    /// The answer to our PING.
    func pingAcknowledged()
    /// The gateway's SETTINGS arrived (and apply): it allows `streamLimit` open streams.
    func settingsReceived(streamLimit: Int)
}

/// Why the HTTP/2 session cannot go on.
struct HTTP2SessionError: Error, CustomStringConvertible {
    var description: String
}

/// A request's header fields, gathered for one `ClientSession.submit`: the names are static
/// text; nghttp2 copies the values when the request is submitted, so they need to live only
/// until then. Reused request after request.
struct HeaderFields: ~Copyable {
    fileprivate let fields: UnsafeMutablePointer<nghttp2_nv>
    fileprivate private(set) var count = 0
    let capacity: Int

    init(capacity: Int) {
        fields = .allocate(capacity: capacity)
        self.capacity = capacity
    }

    deinit { fields.deallocate() }

    mutating func removeAll() { count = 0 }

    /// A field whose value repeats from request to request: HPACK indexes it, so after the
    /// first request it costs a byte or two.
    mutating func add(_ name: StaticString, _ value: UnsafeRawBufferPointer) {
        append(name, value, flags: NGHTTP2_NV_FLAG_NO_COPY_NAME.rawValue)
    }

    /// A field whose value is new every time (`:path`, `apns-id`): kept out of the HPACK
    /// table, where it would only push out the fields that repeat.
    mutating func addUnique(_ name: StaticString, _ value: UnsafeRawBufferPointer) {
        append(name, value, flags: NGHTTP2_NV_FLAG_NO_COPY_NAME.rawValue | NGHTTP2_NV_FLAG_NO_INDEX.rawValue)
    }

    /// A field whose name and value are static text: nothing is copied.
    mutating func add(_ name: StaticString, _ value: StaticString) {
        append(name, UnsafeRawBufferPointer(start: value.utf8Start, count: value.utf8CodeUnitCount),
               flags: NGHTTP2_NV_FLAG_NO_COPY_NAME.rawValue | NGHTTP2_NV_FLAG_NO_COPY_VALUE.rawValue)
    }

    private mutating func append(_ name: StaticString, _ value: UnsafeRawBufferPointer, flags: UInt32) {
        precondition(count < capacity, "more header fields than HeaderFields holds")
        fields[count] = nghttp2_nv(
            name: UnsafeMutablePointer(mutating: name.utf8Start), value: UnsafeMutablePointer(
                mutating: (value.baseAddress ?? UnsafeRawPointer(name.utf8Start)).assumingMemoryBound(to: UInt8.self)),
            namelen: name.utf8CodeUnitCount, valuelen: value.count, flags: UInt8(flags))
        count += 1
    }
}

/// One HTTP/2 client session on a TLS connection: owns the `nghttp2_session *`. nghttp2
/// does the protocol (framing, HPACK, flow control, SETTINGS, PING answers, GOAWAY, stream
/// states); this type submits requests, feeds it what the socket read, collects what it
/// wants written, and turns its callbacks into `ClientSessionDelegate` calls. Loop thread only.
final class ClientSession {
    private let session: OpaquePointer
    /// Not reference counted (nghttp2 calls back several times per answer): the delegate,
    /// the connection, owns the session and lets go of it before it goes itself.
    fileprivate unowned(unsafe) let delegate: any ClientSessionDelegate

    /// Starts a session and queues the connection preface with our SETTINGS. Until the
    /// gateway's own SETTINGS arrive, one stream at a time (APNs allows one until it has
    /// seen a valid provider token).
    init(delegate: any ClientSessionDelegate) throws(HTTP2SessionError) {
        self.delegate = delegate
        var option: OpaquePointer?
        guard nghttp2_option_new(&option) == 0, let option else { throw HTTP2SessionError(description: "nghttp2: out of memory") }
        defer { nghttp2_option_del(option) }
        nghttp2_option_set_peer_max_concurrent_streams(option, 1)
        var session: OpaquePointer?
        let rc = nghttp2_session_client_new2(&session, ClientCallbacks.shared.table, nil, option)
        guard rc == 0, let session else {
            throw HTTP2SessionError(description: "nghttp2: cannot make a session: \(String(cString: nghttp2_strerror(rc)))")
        }
        self.session = session
        nghttp2_session_set_user_data(session, Unmanaged.passUnretained(self).toOpaque())
        // Our SETTINGS: no server push; the rest are the protocol's defaults.
        var push = nghttp2_settings_entry(settings_id: Int32(NGHTTP2_SETTINGS_ENABLE_PUSH.rawValue), value: 0)
        nghttp2_submit_settings(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), &push, 1)
    }

    deinit {
        // Callbacks during the teardown would reach a connection that has moved on.
        nghttp2_session_set_user_data(session, nil)
        nghttp2_session_del(session)
    }

    /// The most streams the gateway allows open at once (its SETTINGS; 1 before they came).
    var remoteStreamLimit: Int {
        Int(nghttp2_session_get_remote_settings(session, NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS))
    }

    /// Queues a POST with `fields` and a body of `bodyLength` bytes (pulled later through
    /// `ClientSessionDelegate.requestBody`); returns its stream id.
    func submit(_ fields: borrowing HeaderFields, bodyLength: Int, slot: Int32) throws(HTTP2SessionError) -> Int32 {
        var provider = nghttp2_data_provider(source: nghttp2_data_source(ptr: nil), read_callback: ClientCallbacks.readBody)
        // Every APNs request has a body (an empty payload is refused before it is staged).
        let streamID = nghttp2_submit_request(session, nil, fields.fields, fields.count, &provider,
                                              UnsafeMutableRawPointer(bitPattern: Int(slot) + 1))
        guard streamID > 0 else {
            throw HTTP2SessionError(description: "cannot submit a request: \(String(cString: nghttp2_strerror(streamID)))")
        }
        return streamID
    }

    /// Queues a PING.
    func ping() {
        nghttp2_submit_ping(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), nil)
    }

    /// Queues GOAWAY (no error): we open no more streams on this connection.
    func goAway() {
        nghttp2_submit_goaway(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), nghttp2_session_get_last_proc_stream_id(session),
                              NGHTTP2_NO_ERROR.rawValue, nil, 0)
    }

    /// Feeds what the socket read; the delegate hears of every answer in it.
    func receive(_ bytes: UnsafeRawBufferPointer) throws(HTTP2SessionError) {
        let consumed = nghttp2_session_mem_recv(session, bytes.baseAddress?.assumingMemoryBound(to: UInt8.self), bytes.count)
        guard consumed >= 0 else {
            throw HTTP2SessionError(description: "the gateway broke the HTTP/2 protocol: \(String(cString: nghttp2_strerror(Int32(consumed))))")
        }
    }

    /// Moves the frames nghttp2 wants to send into `output`, until it has none or `output`
    /// holds `limit` bytes.
    func send(into output: inout OutputBuffer, limit: Int) throws(HTTP2SessionError) {
        while output.count < limit {
            var data: UnsafePointer<UInt8>?
            let length = nghttp2_session_mem_send(session, &data)
            guard length >= 0 else {
                throw HTTP2SessionError(description: "nghttp2 cannot send: \(String(cString: nghttp2_strerror(Int32(length))))")
            }
            guard length > 0, let data else { return }
            output.append(UnsafeRawBufferPointer(start: data, count: length))
        }
    }

    /// Whether nghttp2 has frames to send.
    var wantsToWrite: Bool { nghttp2_session_want_write(session) != 0 }

    fileprivate func slot(_ streamID: Int32) -> Int32? {
        guard let data = nghttp2_session_get_stream_user_data(session, streamID) else { return nil }
        return Int32(Int(bitPattern: data) - 1)
    }
}

// MARK: - Callbacks

/// nghttp2's callback table, built once; each callback finds its `ClientSession` in the
/// session's user data (nil once the session is being torn down: nothing is reported then).
/// Thread rule: filled once in `init`, only read after.
private final class ClientCallbacks: @unchecked Sendable {
    static let shared = ClientCallbacks()
    let table: OpaquePointer

    private init() {
        var table: OpaquePointer?
        precondition(nghttp2_session_callbacks_new(&table) == 0, "nghttp2: out of memory")
        self.table = table!
        nghttp2_session_callbacks_set_on_header_callback(table) { _, frame, name, nameLength, value, valueLength, _, user in
            guard let frame, frame.pointee.hd.type == UInt8(NGHTTP2_HEADERS.rawValue) else { return 0 }
            withSession(user) { session, delegate in
                guard let slot = session.slot(frame.pointee.hd.stream_id) else { return }
                delegate.responseHeader(slot: slot, name: UnsafeRawBufferPointer(start: name, count: nameLength),
                                        value: UnsafeRawBufferPointer(start: value, count: valueLength))
            }
            return 0
        }
        nghttp2_session_callbacks_set_on_data_chunk_recv_callback(table) { _, _, streamID, data, length, user in
            withSession(user) { session, delegate in
                guard let slot = session.slot(streamID) else { return }
                delegate.responseBody(slot: slot, chunk: UnsafeRawBufferPointer(start: data, count: length))
            }
            return 0
        }
        nghttp2_session_callbacks_set_on_stream_close_callback(table) { _, streamID, errorCode, user in
            withSession(user) { session, delegate in
                guard let slot = session.slot(streamID) else { return }
                delegate.streamClosed(slot: slot, refused: errorCode == NGHTTP2_REFUSED_STREAM.rawValue, errorCode: errorCode)
            }
            return 0
        }
        nghttp2_session_callbacks_set_on_frame_not_send_callback(table) { _, frame, _, user in
            guard let frame, frame.pointee.hd.type == UInt8(NGHTTP2_HEADERS.rawValue) else { return 0 }
            withSession(user) { session, delegate in
                guard let slot = session.slot(frame.pointee.hd.stream_id) else { return }
                delegate.requestNotSent(slot: slot)
            }
            return 0
        }
        nghttp2_session_callbacks_set_on_frame_recv_callback(table) { _, frame, user in
            guard let frame else { return 0 }
            let header = frame.pointee.hd
            withSession(user) { _, delegate in
                if header.type == UInt8(NGHTTP2_GOAWAY.rawValue) {
                    let goaway = frame.pointee.goaway
                    delegate.goAway(lastStreamID: goaway.last_stream_id, errorCode: goaway.error_code,
                                    debugData: UnsafeRawBufferPointer(start: goaway.opaque_data, count: goaway.opaque_data_len))
                } else if header.type == UInt8(NGHTTP2_PING.rawValue), header.flags & UInt8(NGHTTP2_FLAG_ACK.rawValue) != 0 {
                    delegate.pingAcknowledged()
                }
            }
            if header.type == UInt8(NGHTTP2_SETTINGS.rawValue), header.flags & UInt8(NGHTTP2_FLAG_ACK.rawValue) == 0 {
                withSession(user) { session, delegate in delegate.settingsReceived(streamLimit: session.remoteStreamLimit) }
            }
            return 0
        }
    }

    /// The request body's source (see `ClientSessionDelegate.requestBody`).
    static let readBody: nghttp2_data_source_read_callback = { _, streamID, buffer, length, flags, _, user in
        var written = 0
        withSession(user) { session, delegate in
            guard let slot = session.slot(streamID), let buffer else { return }
            let (count, isLast) = delegate.requestBody(slot: slot, into: UnsafeMutableRawBufferPointer(start: buffer, count: length))
            written = count
            if isLast { flags!.pointee |= NGHTTP2_DATA_FLAG_EOF.rawValue }
        }
        return written
    }
}

/// The session a callback's user data points to, with its delegate. The session belongs to
/// its connection, which outlives every callback: no retain is needed for the call.
private func withSession(_ user: UnsafeMutableRawPointer?, _ body: (ClientSession, any ClientSessionDelegate) -> Void) {
    guard let user else { return }
    Unmanaged<ClientSession>.fromOpaque(user)._withUnsafeGuaranteedRef { session in
        body(session, session.delegate)
    }
}
