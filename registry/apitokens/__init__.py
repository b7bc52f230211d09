"""Per-user API tokens (django-rest-knox: only SHA-512 digests are stored), made and revoked on /accounts/tokens/."""
