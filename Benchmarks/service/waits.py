"""What the Python benchmarks share: waiting for a condition, and a GET that answers None instead of raising."""
import time
import urllib.request


def wait_for(predicate, timeout, what, step=0.1):
    """predicate's first truthy value within timeout seconds, asked every step seconds; else RuntimeError."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(step)
    raise RuntimeError(f"timed out waiting for {what}")


def http_get(url, timeout=2):
    """The body of url, or None when it cannot be had."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return r.read()
    except OSError:
        return None
