// CoreVideo's pixel buffer, as iOS sample-handling code reads one: lock, read the planes' base
// addresses and bytes per row, unlock. In-app capture's pictures are NV12 in full range
// (`kCVPixelFormatType_420YpCbCr8BiPlanarFullRange`, '420f'): plane 0 is luma (Y, one byte a pixel),
// plane 1 chroma (Cb Cr interleaved, one pair per 2×2 pixels). The planes are the slot of the shared
// frame ring the picture arrived in, read in place: no copy was made in this process. An app's own
// pictures (`CVPixelBufferCreate`, to encode with `VTCompressionSession`) may also be BGRA.
internal import Synchronization
internal import ReplayIPC

public typealias CVReturn = Int32
public typealias OSType = UInt32
public typealias FourCharCode = UInt32
public typealias OSStatus = Int32
public typealias CVOptionFlags = UInt64

public let noErr: OSStatus = 0
public let kCVReturnSuccess: CVReturn = 0
public let kCVReturnError: CVReturn = -6660
public let kCVReturnInvalidArgument: CVReturn = -6661
public let kCVReturnInvalidPixelFormat: CVReturn = -6680
public let kCVReturnInvalidSize: CVReturn = -6681

/// '420f': bi-planar 4:2:0 Y'CbCr, full range (what in-app capture delivers).
public let kCVPixelFormatType_420YpCbCr8BiPlanarFullRange: OSType = 0x3432_3066
/// '420v': the same in video range (listed for code that compares against it; never delivered).
public let kCVPixelFormatType_420YpCbCr8BiPlanarVideoRange: OSType = 0x3432_3076

public struct CVPixelBufferLockFlags: OptionSet, Sendable, Hashable {
    public var rawValue: CVOptionFlags
    public init(rawValue: CVOptionFlags) { self.rawValue = rawValue }
    public static let readOnly = CVPixelBufferLockFlags(rawValue: 1)
}

/// 'BGRA': 32 bits a pixel, B G R A in memory (what a drawing library or a BGRA capture gives).
public let kCVPixelFormatType_32BGRA: OSType = 0x4247_5241

/// The memory a pixel buffer's planes lie in: a slot of the frame ring (read in place), or memory
/// of its own (`CVPixelBufferCreate`).
enum PixelStorage: Sendable {
    case ring(FrameRingVideoFrame)
    case allocated(PixelAllocation)
}

/// A picture's memory made by `CVPixelBufferCreate`: one allocation, its planes one after the other.
///
/// `@unchecked Sendable`: the addresses are fixed at creation and the memory is freed only in
/// `deinit`; what is written into the pixels is the app's to order, as on iOS (lock, write, unlock).
final class PixelAllocation: @unchecked Sendable {
    let memory: UnsafeMutableRawBufferPointer
    /// Each plane's offset into `memory` and its bytes a row.
    let planes: [(offset: Int, bytesPerRow: Int)]

    init(planes sizes: [(bytesPerRow: Int, rows: Int)]) {
        var offset = 0
        var planes: [(offset: Int, bytesPerRow: Int)] = []
        for size in sizes {
            planes.append((offset, size.bytesPerRow))
            offset += size.bytesPerRow * size.rows
        }
        memory = UnsafeMutableRawBufferPointer.allocate(byteCount: max(offset, 1), alignment: 64)
        memory.initializeMemory(as: UInt8.self, repeating: 0)
        self.planes = planes
    }

    deinit { memory.deallocate() }
}

/// CoreVideo's buffer: here always a pixel buffer, over one picture of the frame ring (the slot is
/// the app's until the last reference to this buffer and its sample buffer goes) or over memory of
/// its own (`CVPixelBufferCreate`: NV12 in either range, or BGRA).
///
/// `Sendable`: what it points to is fixed at creation; the lock count is a `Mutex`.
public final class CVBuffer: Sendable {
    let storage: PixelStorage
    let width: Int
    let height: Int
    let pixelFormat: OSType
    private let locks = Mutex(0)

    init(frame: FrameRingVideoFrame) {
        storage = .ring(frame)
        width = frame.width
        height = frame.height
        pixelFormat = kCVPixelFormatType_420YpCbCr8BiPlanarFullRange
    }

    init(width: Int, height: Int, pixelFormat: OSType) {
        self.width = width
        self.height = height
        self.pixelFormat = pixelFormat
        let rowAlignment = 64
        func aligned(_ bytes: Int) -> Int { (bytes + rowAlignment - 1) / rowAlignment * rowAlignment }
        if pixelFormat == kCVPixelFormatType_32BGRA {
            storage = .allocated(PixelAllocation(planes: [(aligned(width * 4), height)]))
        } else {
            let chromaRows = (height + 1) / 2
            storage = .allocated(PixelAllocation(planes: [(aligned(width), height), (aligned((width + 1) / 2 * 2), chromaRows)]))
        }
    }

    /// Two planes (NV12) or none (BGRA, one block of pixels), as CoreVideo counts them.
    var planeCount: Int { pixelFormat == kCVPixelFormatType_32BGRA ? 0 : 2 }

    /// Plane `index`'s first byte (for BGRA, index 0 is the pixels); nil for a plane it has not.
    func address(ofPlane index: Int) -> UnsafeMutableRawPointer? {
        switch storage {
        case .ring(let frame):
            switch index {
            case 0: frame.luma
            case 1: frame.chroma
            default: nil
            }
        case .allocated(let allocation):
            allocation.planes.indices.contains(index) ? allocation.memory.baseAddress! + allocation.planes[index].offset : nil
        }
    }

    func bytesPerRow(ofPlane index: Int) -> Int {
        switch storage {
        case .ring(let frame):
            switch index {
            case 0: frame.lumaStride
            case 1: frame.chromaStride
            default: 0
            }
        case .allocated(let allocation):
            allocation.planes.indices.contains(index) ? allocation.planes[index].bytesPerRow : 0
        }
    }

    fileprivate func lock() {
        locks.withLock { $0 += 1 }
    }

    fileprivate func unlock() -> Bool {
        locks.withLock { count in
            guard count > 0 else { return false }
            count -= 1
            return true
        }
    }

    fileprivate var isLocked: Bool { locks.withLock { $0 > 0 } }
}

public typealias CVImageBuffer = CVBuffer
public typealias CVPixelBuffer = CVImageBuffer

/// A pixel buffer of memory of its own: `kCVPixelFormatType_420YpCbCr8BiPlanarFullRange` ('420f'),
/// `…VideoRange` ('420v') or `kCVPixelFormatType_32BGRA`, zeroed, rows aligned to 64 bytes. The
/// attributes are accepted and not read. Another format, or a size not above 0:
/// `kCVReturnInvalidPixelFormat` or `kCVReturnInvalidSize`.
@discardableResult
public func CVPixelBufferCreate(_ allocator: CFAllocator?, _ width: Int, _ height: Int, _ pixelFormatType: OSType,
                               _ pixelBufferAttributes: CFDictionary?,
                               _ pixelBufferOut: UnsafeMutablePointer<CVPixelBuffer?>) -> CVReturn {
    guard width > 0, height > 0 else { return kCVReturnInvalidSize }
    guard [kCVPixelFormatType_420YpCbCr8BiPlanarFullRange, kCVPixelFormatType_420YpCbCr8BiPlanarVideoRange,
           kCVPixelFormatType_32BGRA].contains(pixelFormatType) else { return kCVReturnInvalidPixelFormat }
    pixelBufferOut.pointee = CVBuffer(width: width, height: height, pixelFormat: pixelFormatType)
    return kCVReturnSuccess
}

/// Makes the base addresses readable (as on iOS, they are nil while the buffer is not locked).
/// `.readOnly` is what capture code passes; without it the app may write into its own picture.
@discardableResult
public func CVPixelBufferLockBaseAddress(_ pixelBuffer: CVPixelBuffer, _ lockFlags: CVPixelBufferLockFlags) -> CVReturn {
    pixelBuffer.lock()
    return kCVReturnSuccess
}

@discardableResult
public func CVPixelBufferUnlockBaseAddress(_ pixelBuffer: CVPixelBuffer, _ unlockFlags: CVPixelBufferLockFlags) -> CVReturn {
    pixelBuffer.unlock() ? kCVReturnSuccess : kCVReturnError
}

public func CVPixelBufferGetWidth(_ pixelBuffer: CVPixelBuffer) -> Int { pixelBuffer.width }
public func CVPixelBufferGetHeight(_ pixelBuffer: CVPixelBuffer) -> Int { pixelBuffer.height }
public func CVPixelBufferGetPixelFormatType(_ pixelBuffer: CVPixelBuffer) -> OSType { pixelBuffer.pixelFormat }
public func CVPixelBufferIsPlanar(_ pixelBuffer: CVPixelBuffer) -> Bool { pixelBuffer.planeCount > 0 }
public func CVPixelBufferGetPlaneCount(_ pixelBuffer: CVPixelBuffer) -> Int { pixelBuffer.planeCount }

/// Plane 0 (luma) or 1 (chroma, CbCr interleaved); nil for another plane, for a BGRA buffer (no
/// planes: `CVPixelBufferGetBaseAddress`) or while not locked.
public func CVPixelBufferGetBaseAddressOfPlane(_ pixelBuffer: CVPixelBuffer, _ planeIndex: Int) -> UnsafeMutableRawPointer? {
    guard pixelBuffer.isLocked, planeIndex < pixelBuffer.planeCount else { return nil }
    return pixelBuffer.address(ofPlane: planeIndex)
}

public func CVPixelBufferGetBytesPerRowOfPlane(_ pixelBuffer: CVPixelBuffer, _ planeIndex: Int) -> Int {
    planeIndex < pixelBuffer.planeCount ? pixelBuffer.bytesPerRow(ofPlane: planeIndex) : 0
}

/// In samples of the plane: the picture's width for luma, half of it (CbCr pairs) for chroma.
public func CVPixelBufferGetWidthOfPlane(_ pixelBuffer: CVPixelBuffer, _ planeIndex: Int) -> Int {
    guard planeIndex < pixelBuffer.planeCount else { return 0 }
    switch planeIndex {
    case 0: return pixelBuffer.width
    case 1: return (pixelBuffer.width + 1) / 2
    default: return 0
    }
}

public func CVPixelBufferGetHeightOfPlane(_ pixelBuffer: CVPixelBuffer, _ planeIndex: Int) -> Int {
    guard planeIndex < pixelBuffer.planeCount else { return 0 }
    switch planeIndex {
    case 0: return pixelBuffer.height
    case 1: return (pixelBuffer.height + 1) / 2
    default: return 0
    }
}

/// A BGRA buffer's pixels; for a planar one, plane 0's address (prefer the per-plane calls). Nil while not locked.
public func CVPixelBufferGetBaseAddress(_ pixelBuffer: CVPixelBuffer) -> UnsafeMutableRawPointer? {
    pixelBuffer.isLocked ? pixelBuffer.address(ofPlane: 0) : nil
}

/// A BGRA buffer's bytes a row; for a planar one, plane 0's.
public func CVPixelBufferGetBytesPerRow(_ pixelBuffer: CVPixelBuffer) -> Int {
    pixelBuffer.bytesPerRow(ofPlane: 0)
}

/// Bytes of every plane, padding included.
public func CVPixelBufferGetDataSize(_ pixelBuffer: CVPixelBuffer) -> Int {
    if pixelBuffer.planeCount == 0 { return pixelBuffer.bytesPerRow(ofPlane: 0) * pixelBuffer.height }
    return pixelBuffer.bytesPerRow(ofPlane: 0) * pixelBuffer.height + pixelBuffer.bytesPerRow(ofPlane: 1) * ((pixelBuffer.height + 1) / 2)
}

/// Pixel buffer attribute keys (CoreVideo's strings), for the options dictionaries iOS code builds
/// (`[kCVPixelBufferPixelFormatTypeKey as String: kCVPixelFormatType_420YpCbCr8BiPlanarFullRange]`).
public let kCVPixelBufferPixelFormatTypeKey: CFString = "PixelFormatType"
public let kCVPixelBufferWidthKey: CFString = "Width"
public let kCVPixelBufferHeightKey: CFString = "Height"
public let kCVPixelBufferIOSurfacePropertiesKey: CFString = "IOSurfaceProperties"
