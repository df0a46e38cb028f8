// CoreFoundation's names as iOS sample code spells them around attachments and options
// (`RPVideoSampleOrientationKey as CFString`, `[kCVPixelBufferWidthKey as String: …]`,
// `… as CFDictionary`), mapped onto the Foundation types that bridge the same way here; and the
// attachments themselves: the orientation every picture carries, and the per-sample dictionaries.
public import Foundation
internal import Synchronization

/// A CoreFoundation string: a Swift `String` here, so `key as CFString` and `key as String` both compile.
public typealias CFString = String
public typealias CFArray = NSArray
public typealias CFMutableArray = NSMutableArray
public typealias CFDictionary = NSDictionary
public typealias CFMutableDictionary = NSMutableDictionary
public typealias CFTypeRef = AnyObject
/// Anything with attachments (`CMSampleBuffer`, `CVPixelBuffer`), as on iOS.
public typealias CMAttachmentBearer = AnyObject

public typealias CMAttachmentMode = UInt32
public let kCMAttachmentMode_ShouldNotPropagate: CMAttachmentMode = 0
public let kCMAttachmentMode_ShouldPropagate: CMAttachmentMode = 1

/// The attachment of every video sample buffer saying how the picture is turned: an `NSNumber`
/// holding a `CGImagePropertyOrientation` raw value. Desktop pictures arrive upright: `.up`.
public let RPVideoSampleOrientationKey = "RPVideoSampleOrientationKey"

/// ImageIO's orientation, with its raw values (EXIF's).
public enum CGImagePropertyOrientation: UInt32, Sendable {
    case up = 1
    case upMirrored = 2
    case down = 3
    case downMirrored = 4
    case leftMirrored = 5
    case right = 6
    case rightMirrored = 7
    case left = 8
}

/// Per-sample attachment keys (`CMSampleBufferGetSampleAttachmentsArray`'s dictionaries), CoreMedia's strings.
public let kCMSampleAttachmentKey_NotSync: CFString = "NotSync"
public let kCMSampleAttachmentKey_DependsOnOthers: CFString = "DependsOnOthers"
public let kCMSampleAttachmentKey_DisplayImmediately: CFString = "DisplayImmediately"
public let kCMSampleAttachmentKey_DoNotDisplay: CFString = "DoNotDisplay"

/// An attachment's value, an object of the app's or ours.
///
/// `@unchecked Sendable`: CoreMedia's attachments are CF objects any thread may read; here they are
/// `NSNumber`s (immutable) or what the app stored with `CMSetAttachment`, handed back as they are,
/// which the app then reads from its own threads as it would on iOS.
struct AttachmentValue: @unchecked Sendable {
    let object: AnyObject
    init(_ object: AnyObject) { self.object = object }
}

/// What `CMGetAttachment` gives. iOS gives a `CFTypeRef` that code reads in two ways: cast,
/// `as? NSNumber`, or directly, `value?.uint32Value` (an `AnyObject` member lookup, which Linux has
/// not). Returning this protocol, which only `NSNumber` adopts, lets both compile without a warning.
public protocol CMAttachmentNumber: AnyObject {
    var boolValue: Bool { get }
    var uint8Value: UInt8 { get }
    var int32Value: Int32 { get }
    var uint32Value: UInt32 { get }
    var intValue: Int { get }
    var uintValue: UInt { get }
    var doubleValue: Double { get }
}

extension NSNumber: CMAttachmentNumber {}

/// The attachment `key` of a sample buffer, or nil: an `NSNumber`, the only kind the samples
/// carry (a value of another kind set with `CMSetAttachment` reads back nil).
public func CMGetAttachment(_ target: CMAttachmentBearer, key: CFString,
                            attachmentModeOut: UnsafeMutablePointer<CMAttachmentMode>?) -> (any CMAttachmentNumber)? {
    guard let buffer = target as? CMSampleBuffer, let value = buffer.attachments.withLock({ $0[key] }) else { return nil }
    attachmentModeOut?.pointee = kCMAttachmentMode_ShouldPropagate
    return value.object as? NSNumber
}

/// Sets (or, with `value` nil, removes) the attachment `key` of a sample buffer.
public func CMSetAttachment(_ target: CMAttachmentBearer, key: CFString, value: CFTypeRef?, attachmentMode: CMAttachmentMode) {
    guard let buffer = target as? CMSampleBuffer else { return }
    let stored = value.map(AttachmentValue.init)
    buffer.attachments.withLock { $0[key] = stored }
}

public func CMRemoveAttachment(_ target: CMAttachmentBearer, key: CFString) {
    CMSetAttachment(target, key: key, value: nil, attachmentMode: kCMAttachmentMode_ShouldNotPropagate)
}

/// One dictionary per sample (a picture has one; a chunk of sound is one sample here for its
/// attachments), made when first asked with `createIfNecessary`, then the same each call; read it as
/// `as? [[CFString: Any]]`. Keys are `kCMSampleAttachmentKey_…`; the capture sets none (every picture
/// stands alone). Writing into it is not offered: Linux's Foundation hands out a copy of a dictionary
/// kept in an array, and `CFDictionarySetValue` does not exist here.
public func CMSampleBufferGetSampleAttachmentsArray(_ sbuf: CMSampleBuffer, createIfNecessary: Bool) -> CFArray? {
    let made = sbuf.sampleAttachments.withLock { stored -> AttachmentValue? in
        if stored == nil, createIfNecessary {
            let array = NSMutableArray()
            array.add(NSMutableDictionary())
            stored = AttachmentValue(array)
        }
        return stored
    }
    return made?.object as? NSArray
}
