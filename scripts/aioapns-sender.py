"""aioapns 4.0 at its defaults against an HTTP/2 gateway: the aioapns client of
HTTP2ClientTests. Run it with the virtualenv of scripts/h2-python-clients.sh:

    .build/legacy-clients/h2-python/venv/bin/python scripts/aioapns-sender.py \
        HOST PORT CA_PEM AUTH_KEY_P8 KEY_ID TEAM_ID COUNT DEAD_EVERY

Token authentication with aioapns's own signing; its own TLS setup (`ssl.create_default_context()`,
which offers no ALPN) trusting CA_PEM. One notification after another (each awaited), so that
aioapns keeps to one connection: it signs a token per connection, and it opens more under
concurrency, because the one-stream SETTINGS a connection gets until its first valid token (as
APNs sends it) shrinks its stream pool for good (DynamicBoundedSemaphore clamps the releases
that should grow it back). A connection opened in a later second brings a second token, which
the mock, holding one token per team, answers 429 TooManyProviderTokenUpdates.

Notification n (1...COUNT) goes to a token ending in `dead` when n is a multiple of DEAD_EVERY,
else in `a11e`. Prints one JSON line: {"sent": COUNT, "results": [what aioapns answered for
notification n, "200" or "STATUS REASON"], "timestamps": [the 410s' timestamps], "faults":
[aioapns's own warnings and errors, and exceptions]} and exits.
"""
import asyncio
import json
import logging
import ssl
import sys

from aioapns import APNs, NotificationRequest
from aioapns.connection import APNsProductionClientProtocol

host, port, ca, key_path, key_id, team_id = sys.argv[1], int(sys.argv[2]), *sys.argv[3:7]
count, dead_every = int(sys.argv[7]), int(sys.argv[8])


class Faults(logging.Handler):
    """aioapns logs what it does not expect (an unknown HTTP/2 event, a lost connection) and
    carries on, so its log is where a fault shows. Rejections it reports through err_func."""

    def __init__(self):
        super().__init__(logging.WARNING)
        self.messages = []

    def emit(self, record):
        self.messages.append(record.getMessage().splitlines()[0])


faults = Faults()
logging.getLogger("aioapns").addHandler(faults)
# aioapns knows only Apple's hosts, on port 443: the one thing changed is where it connects
# (it also sends this host as `host`, in place of `:authority`).
APNsProductionClientProtocol.APNS_SERVER = host
APNsProductionClientProtocol.APNS_PORT = port


async def rejected(request, result):
    pass  # counted from send_notification's result; this keeps aioapns from logging each


async def main():
    with open(key_path) as f:
        key = f.read()
    apns = APNs(key=key, key_id=key_id, team_id=team_id, topic="com.example.app",
                # What aioapns makes when given none, trusting the test CA instead of the system's.
                ssl_context=ssl.create_default_context(cafile=ca), err_func=rejected)

    async def send(n):
        token = "%060x%s" % (n, "dead" if n % dead_every == 0 else "a11e")
        request = NotificationRequest(device_token=token, message={"aps": {"alert": "Spring sale", "badge": 1}})
        try:
            result = await apns.send_notification(request)
        except Exception as error:
            faults.messages.append("notification %d: %s" % (n, type(error).__name__))
            return "exception", None
        if result.is_successful:
            return "200", None
        return "%s %s" % (result.status, result.description), result.timestamp

    outcomes = [await asyncio.wait_for(send(n), timeout=30) for n in range(1, count + 1)]
    apns.pool.close()
    return outcomes


outcomes = asyncio.run(main())
print(json.dumps({"sent": count, "results": [result for result, _ in outcomes],
                  "timestamps": [stamp for result, stamp in outcomes if result.startswith("410")],
                  "faults": faults.messages}), flush=True)
