import CFFmpeg
import CYUV

/// One I420 (or NV12) picture owned by an `AVFrame` (the `PixelBuffer` role), sized once and reused
/// through `VideoFramePool`. Confined to one thread at a time: the capture thread fills it, hands it
/// over through a queue, the encoder thread reads it and gives it back.
package final class VideoFrame: @unchecked Sendable {
    /// How the picture lies in memory.
    package enum Layout: Sendable {
        /// Three planes (Y, U, V): what the capture converts the screen to, and what every encoder takes.
        case i420
        /// Two planes (Y, then U and V interleaved): the frame ring's pictures as an upload extension
        /// gets them, and libx264's own layout, so that it takes them with a plain copy. Only libx264
        /// through its own API (`VideoEncoderSettings.Backend.x264`) encodes them.
        case nv12
    }
    let frame: UnsafeMutablePointer<AVFrame>
    package let width: Int
    package let height: Int
    package let layout: Layout
    /// Capture time on the monotonic clock, in nanoseconds.
    package var timestamp: Int64 = 0
    /// The frame tick it was captured at (its presentation time in 1/fps units).
    package var tick: Int64 = 0
    /// How much of the picture its last update changed (0...1; 0 for a repeat). The encoder lets
    /// only pictures that changed most of the screen become B-frames.
    package var changedFraction = 0.0
    /// The macroblocks that changed since the picture before this one went to the encoder (all of
    /// them unless the capture says otherwise): libx264 skips its analysis of the others.
    package var changedBlocks: ChangedMacroblocks
    /// The number of the capture's picture this one holds (`ChangeHistory`), nil when none.
    package var pictureNumber: Int64?

    package init(width: Int, height: Int, layout: Layout = .i420) {
        guard let frame = av_frame_alloc() else { fatalError("out of memory allocating a video frame") }
        frame.pointee.width = Int32(width)
        frame.pointee.height = Int32(height)
        frame.pointee.format = (layout == .i420 ? AV_PIX_FMT_YUV420P : AV_PIX_FMT_NV12).rawValue
        guard av_frame_get_buffer(frame, 64) >= 0 else { fatalError("out of memory allocating \(width)x\(height) picture") }
        self.frame = frame
        self.width = width
        self.height = height
        self.layout = layout
        self.changedBlocks = ChangedMacroblocks(width: width, height: height)
    }

    deinit {
        var pointer: UnsafeMutablePointer<AVFrame>? = frame
        av_frame_free(&pointer)
    }

    /// An I420 picture's planes.
    package var planes: (y: UnsafeMutablePointer<UInt8>, u: UnsafeMutablePointer<UInt8>, v: UnsafeMutablePointer<UInt8>) {
        precondition(layout == .i420, "planes of an NV12 picture: use nv12Planes")
        return (frame.pointee.data.0!, frame.pointee.data.1!, frame.pointee.data.2!)
    }

    package var strides: (y: Int, u: Int, v: Int) {
        (Int(frame.pointee.linesize.0), Int(frame.pointee.linesize.1), Int(frame.pointee.linesize.2))
    }

    /// An NV12 picture's planes (luma, interleaved chroma) and their bytes a row.
    package var nv12Planes: (y: UnsafeMutablePointer<UInt8>, uv: UnsafeMutablePointer<UInt8>, yStride: Int, uvStride: Int) {
        precondition(layout == .nv12, "nv12Planes of an I420 picture: use planes")
        return (frame.pointee.data.0!, frame.pointee.data.1!, Int(frame.pointee.linesize.0), Int(frame.pointee.linesize.1))
    }

    /// Converts the part `columns` × `rows` of a BGRX/BGRA picture (widened to even edges, clipped
    /// to this frame) into the same place of this frame.
    package func convert(fromBGRA source: UnsafePointer<UInt8>, stride: Int, columns: Range<Int>? = nil, rows: Range<Int>) {
        let columns = columns ?? 0..<width
        let first = max(0, rows.lowerBound & ~1), last = min(height, (rows.upperBound + 1) & ~1)
        let left = max(0, columns.lowerBound & ~1), right = min(width, (columns.upperBound + 1) & ~1)
        guard last > first, right > left else { return }
        let (y, u, v) = planes
        let (ys, us, vs) = strides
        _ = ARGBToI420(source + first * stride + left * 4, Int32(stride),
                       y + first * ys + left, Int32(ys),
                       u + (first / 2) * us + left / 2, Int32(us),
                       v + (first / 2) * vs + left / 2, Int32(vs),
                       Int32(right - left), Int32(last - first))
    }

    /// Copies the whole picture of `other` (same size) into this frame; or, given `blocks`, only
    /// those macroblocks (this frame holds `other`'s pixels elsewhere already).
    package func copy(from other: VideoFrame, blocks: ChangedMacroblocks? = nil) {
        precondition(other.width == width && other.height == height && other.layout == layout)
        av_frame_make_writable(frame)
        if let blocks, !blocks.all, layout == .i420 {
            copyBlocks(blocks, from: other)
        } else {
            av_frame_copy(frame, other.frame)
        }
        timestamp = other.timestamp
        tick = other.tick
        changedFraction = other.changedFraction
        changedBlocks = other.changedBlocks
    }

    /// Copies the macroblocks marked in `blocks` from `other`, a run of neighbours in a row at a time.
    private func copyBlocks(_ blocks: ChangedMacroblocks, from other: VideoFrame) {
        let size = ChangedMacroblocks.size
        let (y, u, v) = planes
        let (oy, ou, ov) = other.planes
        let (ys, us, vs) = strides
        let (oys, ous, ovs) = other.strides
        for row in 0..<blocks.rows {
            let top = row * size, bottom = min(height, top + size)
            guard top < bottom else { break }
            var column = 0
            while column < blocks.columns {
                guard blocks.isChanged(column: column, row: row) else {
                    column += 1
                    continue
                }
                var end = column + 1
                while end < blocks.columns, blocks.isChanged(column: end, row: row) { end += 1 }
                let left = column * size, right = min(width, end * size)
                for line in top..<bottom {
                    (y + line * ys + left).update(from: oy + line * oys + left, count: right - left)
                }
                // Sizes are even: the chroma of these pixels is exactly half.
                for line in (top / 2)..<((bottom + 1) / 2) {
                    (u + line * us + left / 2).update(from: ou + line * ous + left / 2, count: (right - left + 1) / 2)
                    (v + line * vs + left / 2).update(from: ov + line * ovs + left / 2, count: (right - left + 1) / 2)
                }
                column = end
            }
        }
    }
}
