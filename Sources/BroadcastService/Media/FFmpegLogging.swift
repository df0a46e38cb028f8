internal import CFFmpeg
internal import CReplayShim
import Logging

/// Routes FFmpeg's log lines (warnings and errors) into swift-log, label `openreplaykit.service.ffmpeg`.
public enum FFmpegLogging {
    public static func route() {
        ork_av_log_route({ level, line in
            guard let line else { return }
            let text = String(cString: line)
            let logger = Logger(label: "openreplaykit.service.ffmpeg")
            if level <= AV_LOG_ERROR { logger.error("\(text)") } else { logger.warning("\(text)") }
        }, AV_LOG_WARNING)
    }
}
