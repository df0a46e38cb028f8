import CFFmpeg
import CFFmpegShim
public import Logging
import Synchronization

/// Routes FFmpeg's own log lines into a swift-log `Logger` (warnings and errors only: FFmpeg's info
/// lines are for its command-line tools).
///
/// FFmpeg has one log callback per process; this is the only place that sets it, so the recorder
/// and the broadcast service cannot compete for it. The latest `route(to:)` wins (replayd routes
/// to the session that is starting).
public enum FFmpegLog {
    private static let target = Mutex<Logger?>(nil)

    public static func route(to logger: Logger) {
        target.withLock { $0 = logger }
        ork_av_log_route({ level, line in
            guard let line else { return }
            let text = String(cString: line)
            FFmpegLog.target.withLock { logger in
                guard let logger else { return }
                if level <= AV_LOG_ERROR {
                    logger.error("ffmpeg: \(text)")
                } else {
                    logger.warning("ffmpeg: \(text)")
                }
            }
        }, AV_LOG_WARNING)
    }
}
