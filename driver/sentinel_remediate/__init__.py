"""sentinel-remediate: drive the sentinel.remediation collection through ansible-runner."""
__version__ = "0.1.0"
