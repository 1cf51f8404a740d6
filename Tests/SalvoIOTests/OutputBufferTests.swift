import Testing
@testable import SalvoIO

/// Output buffers that share a thread's storage hold it only while bytes wait for the socket.
@Suite struct OutputBufferTests {
    @Test func buffersSharingStorageHoldItOnlyWhileBytesWait() {
        let shared = SharedOutputBuffers()
        var first = OutputBuffer(capacity: 64, sharing: shared)
        var second = OutputBuffer(capacity: 64, sharing: shared)

        append([1, 2, 3], to: &first)
        first.consume(3)
        #expect(shared.spareCount == 1, "written out, the storage goes back")
        append([4, 5], to: &second)
        #expect(shared.spareCount == 0, "the next writer takes it")

        // A socket that takes part of the bytes: the rest waits where it was.
        append([6, 7, 8], to: &first)
        first.consume(1)
        #expect(Array(first.readable) == [7, 8])
        #expect(Array(second.readable) == [4, 5])
        second.consume(2)
        first.consume(2)
        #expect(shared.spareCount == 2)

        // Three held at once: all three are kept, for the next time three are.
        var third = OutputBuffer(capacity: 64, sharing: shared)
        append([9], to: &first)
        append([10], to: &second)
        append([11], to: &third)
        first.consume(1)
        second.consume(1)
        third.consume(1)
        #expect(shared.spareCount == 3)
    }

    @Test func aBurstLargerThanTheCapacityGrowsTheBufferItIsWrittenTo() {
        let shared = SharedOutputBuffers()
        var buffer = OutputBuffer(capacity: 16, sharing: shared)
        append(Array(0..<10), to: &buffer)
        append(Array(10..<40), to: &buffer)
        #expect(Array(buffer.readable) == Array(0..<40))
        buffer.consume(40)
        #expect(shared.spareCount == 1)
        // The larger storage serves the next writer.
        append(Array(0..<40), to: &buffer)
        #expect(shared.spareCount == 0)
        #expect(buffer.takeAll() == Array(0..<40))
    }

    @Test func aBufferOfItsOwnKeepsItsStorage() {
        var buffer = OutputBuffer(capacity: 8)
        append([1, 2, 3], to: &buffer)
        #expect(buffer.takeAll() == [1, 2, 3])
        let isEmpty = buffer.isEmpty
        #expect(isEmpty)
        append([4], to: &buffer)
        #expect(Array(buffer.readable) == [4])
    }

    private func append(_ bytes: [UInt8], to buffer: inout OutputBuffer) {
        bytes.withUnsafeBytes { buffer.append($0) }
    }
}
