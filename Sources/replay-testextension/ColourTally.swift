import Foundation
import OpenReplayKit

/// Which strong colours the extension's pictures show, for the in-app broadcast's privacy test:
/// each picture (NV12, full range) is sampled every 8 pixels, and the first picture showing red,
/// green or blue (at least 16 samples of it) is noted as `colour NAME at picture N`. An app's
/// broadcast must never show the red of another app's window.
///
/// (`BroadcastSession.encode` also says where viewers watch and the service's figures once the first
/// picture came, `updateBroadcastURL` and `updateServiceInfo`, as a real service does once it is live.)
/// Called from the SDK's one delivery thread only (the handler's `processSampleBuffer`).
final class ColourTally {
    private var seen: Set<String> = []
    private var pictures = 0

    func add(_ image: CVImageBuffer, note: (String) -> Void) {
        pictures += 1
        CVPixelBufferLockBaseAddress(image, .readOnly)
        defer { CVPixelBufferUnlockBaseAddress(image, .readOnly) }
        guard let luma = CVPixelBufferGetBaseAddressOfPlane(image, 0), let chroma = CVPixelBufferGetBaseAddressOfPlane(image, 1) else { return }
        let width = CVPixelBufferGetWidth(image), height = CVPixelBufferGetHeight(image)
        let lumaRow = CVPixelBufferGetBytesPerRowOfPlane(image, 0), chromaRow = CVPixelBufferGetBytesPerRowOfPlane(image, 1)
        var counts: [String: Int] = [:]
        for y in stride(from: 4, to: height, by: 8) {
            for x in stride(from: 4, to: width, by: 8) {
                let l = Int(luma.load(fromByteOffset: y * lumaRow + x, as: UInt8.self))
                let cb = Int(chroma.load(fromByteOffset: (y / 2) * chromaRow + (x / 2) * 2, as: UInt8.self))
                let cr = Int(chroma.load(fromByteOffset: (y / 2) * chromaRow + (x / 2) * 2 + 1, as: UInt8.self))
                // Full-range BT.601: red 76/85/255, green 150/44/21, blue 29/255/107.
                if cr > 200 && cb < 120 && l < 140 { counts["red", default: 0] += 1 }
                else if cb < 80 && cr < 80 && l > 100 { counts["green", default: 0] += 1 }
                else if cb > 200 && cr < 150 && l < 80 { counts["blue", default: 0] += 1 }
            }
        }
        for (name, count) in counts where count >= 16 && seen.insert(name).inserted {
            note("colour \(name) at picture \(pictures)")
        }
    }
}
