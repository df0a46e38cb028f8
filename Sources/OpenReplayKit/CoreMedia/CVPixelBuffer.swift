// CoreVideo's pixel buffer, as iOS sample-handling code reads one: lock, read the planes' base
// addresses and bytes per row, unlock. In-app capture's pictures are NV12 in full range
// (`kCVPixelFormatType_420YpCbCr8BiPlanarFullRange`, '420f'): plane 0 is luma (Y, one byte a pixel),
// plane 1 chroma (Cb Cr interleaved, one pair per 2×2 pixels). The planes are the slot of the shared
// frame ring the picture arrived in, read in place: no copy was made in this process.
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

/// '420f': bi-planar 4:2:0 Y'CbCr, full range (what in-app capture delivers).
public let kCVPixelFormatType_420YpCbCr8BiPlanarFullRange: OSType = 0x3432_3066
/// '420v': the same in video range (listed for code that compares against it; never delivered).
public let kCVPixelFormatType_420YpCbCr8BiPlanarVideoRange: OSType = 0x3432_3076

public struct CVPixelBufferLockFlags: OptionSet, Sendable, Hashable {
    public var rawValue: CVOptionFlags
    public init(rawValue: CVOptionFlags) { self.rawValue = rawValue }
    public static let readOnly = CVPixelBufferLockFlags(rawValue: 1)
}

/// CoreVideo's buffer: here always a pixel buffer over one picture of the frame ring. The slot is
/// the app's until the last reference to this buffer (and its sample buffer) goes.
///
/// `Sendable`: what it points to is fixed at creation; the lock count is a `Mutex`.
public final class CVBuffer: Sendable {
    let frame: FrameRingVideoFrame
    private let locks = Mutex(0)

    init(frame: FrameRingVideoFrame) {
        self.frame = frame
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

public func CVPixelBufferGetWidth(_ pixelBuffer: CVPixelBuffer) -> Int { pixelBuffer.frame.width }
public func CVPixelBufferGetHeight(_ pixelBuffer: CVPixelBuffer) -> Int { pixelBuffer.frame.height }
public func CVPixelBufferGetPixelFormatType(_ pixelBuffer: CVPixelBuffer) -> OSType { kCVPixelFormatType_420YpCbCr8BiPlanarFullRange }
public func CVPixelBufferIsPlanar(_ pixelBuffer: CVPixelBuffer) -> Bool { true }
public func CVPixelBufferGetPlaneCount(_ pixelBuffer: CVPixelBuffer) -> Int { 2 }

/// Plane 0 (luma) or 1 (chroma, CbCr interleaved); nil for another plane or while not locked.
public func CVPixelBufferGetBaseAddressOfPlane(_ pixelBuffer: CVPixelBuffer, _ planeIndex: Int) -> UnsafeMutableRawPointer? {
    guard pixelBuffer.isLocked else { return nil }
    switch planeIndex {
    case 0: return pixelBuffer.frame.luma
    case 1: return pixelBuffer.frame.chroma
    default: return nil
    }
}

public func CVPixelBufferGetBytesPerRowOfPlane(_ pixelBuffer: CVPixelBuffer, _ planeIndex: Int) -> Int {
    switch planeIndex {
    case 0: pixelBuffer.frame.lumaStride
    case 1: pixelBuffer.frame.chromaStride
    default: 0
    }
}

/// In samples of the plane: the picture's width for luma, half of it (CbCr pairs) for chroma.
public func CVPixelBufferGetWidthOfPlane(_ pixelBuffer: CVPixelBuffer, _ planeIndex: Int) -> Int {
    switch planeIndex {
    case 0: pixelBuffer.frame.width
    case 1: (pixelBuffer.frame.width + 1) / 2
    default: 0
    }
}

public func CVPixelBufferGetHeightOfPlane(_ pixelBuffer: CVPixelBuffer, _ planeIndex: Int) -> Int {
    switch planeIndex {
    case 0: pixelBuffer.frame.height
    case 1: (pixelBuffer.frame.height + 1) / 2
    default: 0
    }
}

/// For this planar format, plane 0's address (nil while not locked); prefer the per-plane calls.
public func CVPixelBufferGetBaseAddress(_ pixelBuffer: CVPixelBuffer) -> UnsafeMutableRawPointer? {
    CVPixelBufferGetBaseAddressOfPlane(pixelBuffer, 0)
}

/// For this planar format, plane 0's bytes per row.
public func CVPixelBufferGetBytesPerRow(_ pixelBuffer: CVPixelBuffer) -> Int {
    CVPixelBufferGetBytesPerRowOfPlane(pixelBuffer, 0)
}

/// Bytes of both planes, padding included.
public func CVPixelBufferGetDataSize(_ pixelBuffer: CVPixelBuffer) -> Int {
    let frame = pixelBuffer.frame
    return frame.lumaStride * frame.height + frame.chromaStride * ((frame.height + 1) / 2)
}

/// Pixel buffer attribute keys (CoreVideo's strings), for the options dictionaries iOS code builds
/// (`[kCVPixelBufferPixelFormatTypeKey as String: kCVPixelFormatType_420YpCbCr8BiPlanarFullRange]`).
public let kCVPixelBufferPixelFormatTypeKey: CFString = "PixelFormatType"
public let kCVPixelBufferWidthKey: CFString = "Width"
public let kCVPixelBufferHeightKey: CFString = "Height"
public let kCVPixelBufferIOSurfacePropertiesKey: CFString = "IOSurfaceProperties"
