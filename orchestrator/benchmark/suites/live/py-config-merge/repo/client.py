from config import load_settings


class Client:
    def __init__(self, **options):
        self.settings = load_settings(options)

    def describe(self):
        s = self.settings
        return f"timeout={s['timeout']} retries={s['retries']}"
