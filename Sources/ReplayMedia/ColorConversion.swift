import CFFmpeg
import CYUV

/// BGRX → I420 conversion, by the library the benchmark chose (`replay-bench convert` measures both
/// on the same pictures; docs/BENCHMARKS.md): libyuv's `ARGBToI420` is much faster and converts a
/// band of rows as cheaply as a whole picture, so the recording pipeline uses it (`VideoFrame.convert`).
package enum ColorConversionLibrary: String, Sendable, CaseIterable {
    case libyuv, libswscale
}

/// Converts whole BGRX pictures of one size into a `VideoFrame`. Owns its swscale context.
package final class ColorConverter {
    package let library: ColorConversionLibrary
    private let width: Int
    private let height: Int
    private let scaler: OpaquePointer?

    package init(library: ColorConversionLibrary, width: Int, height: Int) {
        self.library = library
        self.width = width
        self.height = height
        if library == .libswscale {
            scaler = sws_getContext(Int32(width), Int32(height), AV_PIX_FMT_BGR0, Int32(width), Int32(height), AV_PIX_FMT_YUV420P,
                                    SWS_BILINEAR, nil, nil, nil)
        } else {
            scaler = nil
        }
    }

    deinit {
        sws_freeContext(scaler)
    }

    package func convert(_ source: UnsafePointer<UInt8>, stride: Int, into frame: VideoFrame) {
        switch library {
        case .libyuv:
            frame.convert(fromBGRA: source, stride: stride, rows: 0..<height)
        case .libswscale:
            var sourcePlanes: [UnsafePointer<UInt8>?] = [source, nil, nil, nil]
            var sourceStrides: [Int32] = [Int32(stride), 0, 0, 0]
            let (y, u, v) = frame.planes
            let (ys, us, vs) = frame.strides
            var planes: [UnsafeMutablePointer<UInt8>?] = [y, u, v, nil]
            var strides: [Int32] = [Int32(ys), Int32(us), Int32(vs), 0]
            _ = sws_scale(scaler, &sourcePlanes, &sourceStrides, 0, Int32(height), &planes, &strides)
        }
    }
}
