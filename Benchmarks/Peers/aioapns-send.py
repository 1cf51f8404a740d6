"""aioapns-send: sends COUNT notifications to an APNs-shaped gateway with aioapns (PyPI), a
typical Python APNs library, and prints the statuses. Run with the virtualenv that
scripts/h2-peers.sh makes (.build/peers/venv):

  aioapns-send.py --port PORT --ca CA.pem --key AuthKey.p8 --key-id ID --team-id TEAM
                  --topic TOPIC --token HEX --payload FILE [--count 10000]
                  [--connections 4] [--in-flight 400] [--token-per-connection]

aioapns has no host option: its protocol classes name api.push.apple.com:443 as class
attributes, so they are pointed at 127.0.0.1:PORT here. Its default SSL context offers no
ALPN, which the mock (like Apple) refuses, so the context passed in offers h2 and trusts the
mock's CA. It signs its own provider token per connection, from the same key. It has no
concurrency setting of its own: callers gather send_notification calls, so IN_FLIGHT tasks
each keep one notification outstanding. Output, one line:
  requests=N seconds=S rate=R connections=K loop_cpu_us=U status200=A [statusXXX=B ...]
"""
import argparse, asyncio, collections, json, resource, ssl, time

import aioapns.connection
from aioapns import APNs, NotificationRequest, PushType

p = argparse.ArgumentParser()
for name in ("--port", "--ca", "--key", "--key-id", "--team-id", "--topic", "--token", "--payload"):
    p.add_argument(name, required=True)
p.add_argument("--count", type=int, default=10000)
p.add_argument("--connections", type=int, default=4)
p.add_argument("--in-flight", type=int, default=400)
p.add_argument("--token-per-connection", action="store_true")
a = p.parse_args()

for cls in (aioapns.connection.APNsProductionClientProtocol, aioapns.connection.APNsDevelopmentClientProtocol):
    cls.APNS_SERVER, cls.APNS_PORT = "127.0.0.1", int(a.port)

# aioapns signs a provider token per connection (a JWTAuthorizationHeaderProvider each). Two
# connections opened in different seconds carry different iat, and the later token is refused
# with 429 TooManyProviderTokenUpdates, by the mock as by APNs (one token per team per 20
# minutes): seen here as a quarter of the notifications refused. So the connections share one
# provider, as a careful user of aioapns would arrange; --token-per-connection keeps the library's own.
if not a.token_per_connection:
    shared = {}
    own_provider = aioapns.connection.JWTAuthorizationHeaderProvider
    aioapns.connection.JWTAuthorizationHeaderProvider = lambda key, key_id, team_id: \
        shared.setdefault((key_id, team_id), own_provider(key, key_id, team_id))

context = ssl.create_default_context(cafile=a.ca)
context.set_alpn_protocols(["h2"])
message = json.load(open(a.payload))  # aioapns serialises it again with json.dumps


async def main():
    apns = APNs(key=open(a.key).read(), key_id=a.key_id, team_id=a.team_id, topic=a.topic,
                max_connections=a.connections, ssl_context=context)
    statuses = collections.Counter()

    async def worker(share):
        for _ in range(share):
            try:
                r = await apns.send_notification(
                    NotificationRequest(device_token=a.token, message=message, push_type=PushType.ALERT))
                statuses[r.status] += 1
            except Exception as e:  # a failure without a status: counted, not fatal
                statuses["failed:" + type(e).__name__] += 1

    start, cpu0 = time.monotonic(), resource.getrusage(resource.RUSAGE_SELF)
    await asyncio.gather(*(worker(a.count // a.in_flight + (w < a.count % a.in_flight))
                           for w in range(a.in_flight)))
    seconds, cpu1 = time.monotonic() - start, resource.getrusage(resource.RUSAGE_SELF)
    # CPU of the sending alone, without the interpreter's start and imports (in the line as loop_cpu_us).
    loop_us = (cpu1.ru_utime + cpu1.ru_stime - cpu0.ru_utime - cpu0.ru_stime) / a.count * 1e6
    apns.pool.close()
    line = f"requests={a.count} seconds={seconds:.3f} rate={int(a.count / seconds)} connections={len(apns.pool.connections)} loop_cpu_us={loop_us:.1f}"
    for status, n in sorted(statuses.items()):
        line += f" status{status}={n}"
    print(line)


asyncio.run(main())
