"""Drives a radkit server with the official A2A Python SDK (a2a-sdk 0.3.x): card, send, stream,
input-required round trip, get, cancel, resubscribe, push-notification configs with a delivery to a
local webhook (the server runs with --push-allow-private) and the error codes. Prints one line per check and
exits non-zero on the first failure. Usage: a2a_sdk_check.py <base-url> [<bearer-token>]"""

import asyncio
import sys
import uuid

import httpx
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.client.errors import A2AClientHTTPError, A2AClientJSONRPCError
from a2a.types import (
    GetTaskPushNotificationConfigParams,
    Message,
    MessageSendConfiguration,
    Part,
    Role,
    TaskIdParams,
    TaskPushNotificationConfig,
    PushNotificationConfig,
    Task,
    TaskQueryParams,
    TaskState,
    TextPart,
)
from webhook import Webhook

BASE = sys.argv[1].rstrip("/")
TOKEN = sys.argv[2] if len(sys.argv) > 2 else None


def msg(text, task_id=None, context_id=None):
    return Message(
        role=Role.user,
        parts=[Part(root=TextPart(text=text))],
        message_id=str(uuid.uuid4()),
        task_id=task_id,
        context_id=context_id,
    )


def check(name, cond, detail=""):
    if not cond:
        print(f"FAIL {name} {detail}", flush=True)
        sys.exit(1)
    print(f"PASS {name}", flush=True)


async def expect_code(name, code, coro):
    try:
        result = coro
        if hasattr(result, "__anext__"):
            async for _ in result:
                pass
        else:
            await result
    except A2AClientJSONRPCError as e:
        check(name, e.error.code == code, f"got {e.error.code}: {e.error.message}")
        return
    check(name, False, "no error raised")


async def main():
    headers = {"Authorization": f"Bearer {TOKEN}"} if TOKEN else {}
    async with httpx.AsyncClient(timeout=30, headers=headers) as http:
        card = await A2ACardResolver(http, BASE).get_agent_card()
        check("card protocolVersion", card.protocol_version == "0.3.0", card.protocol_version)
        check("card url is the endpoint", card.url.rstrip("/") == BASE, card.url)
        check("card streaming", card.capabilities.streaming is True)
        check("card skills", len(card.skills) >= 1 and all(s.id and s.name and s.description for s in card.skills))
        if TOKEN:
            check("card names its auth scheme", card.security_schemes and "bearer" in card.security_schemes)

        blocking = ClientFactory(ClientConfig(streaming=False, httpx_client=http)).create(card)
        streaming = ClientFactory(ClientConfig(streaming=True, httpx_client=http)).create(card)

        # message/send (blocking): the research loop asks a human.
        events = [e async for e in blocking.send_message(msg("Durable execution for agents"))]
        task, _ = events[-1]
        check("send -> input-required", task.status.state == TaskState.input_required, task.status.state)
        question = task.status.message.parts[0].root.text if task.status.message else ""
        check("input-required carries the question", "human input" in question, question)

        # message/stream continuing the task: the reply finishes it.
        updates = [e async for e in streaming.send_message(msg("Make it friendlier.", task_id=task.id, context_id=task.context_id))]
        final_task, last = updates[-1]
        check("stream reply -> completed", final_task.status.state == TaskState.completed, final_task.status.state)
        check("stream ends with final", last is None or getattr(last, "final", True))
        artifacts = final_task.artifacts or []
        check("stream carried the artifact", any(a.name == "final.txt" for a in artifacts), [a.name for a in artifacts])

        # tasks/get with historyLength.
        got = await blocking.get_task(TaskQueryParams(id=task.id, history_length=2))
        check("get -> completed", got.status.state == TaskState.completed)
        check("get honours historyLength", got.history is not None and len(got.history) == 2, len(got.history or []))

        # A fresh streamed task from the start: first event is the task, then updates to input-required.
        fresh = [e async for e in streaming.send_message(msg("Sagas and compensation"))]
        fresh_task, fresh_last = fresh[-1]
        check("stream new task -> input-required", fresh_task.status.state == TaskState.input_required, fresh_task.status.state)
        check("stream new task has updates", len(fresh) >= 2, len(fresh))

        # tasks/resubscribe of an input-required task replays its story and ends.
        replay = [e async for e in streaming.resubscribe(TaskIdParams(id=fresh_task.id))]
        states = [u.status.state for (_, u) in replay if u is not None and hasattr(u, "status")]
        check("resubscribe replays the story", TaskState.working in states and states[-1] == TaskState.input_required, states)

        # A direct message answer (the conformance skill's tck-message-response): a Message and no
        # task, from a blocking send and as the one event of a stream.
        for name, client in [("send", blocking), ("stream", streaming)]:
            direct = Message(
                role=Role.user,
                parts=[Part(root=TextPart(text="x"))],
                message_id=f"tck-message-response-{uuid.uuid4()}",
                metadata={"skillId": "conformance"},
            )
            got = [e async for e in client.send_message(direct)]
            answer = got[0] if len(got) == 1 and isinstance(got[0], Message) else None
            check(
                f"{name}: a direct answer is one Message",
                answer is not None and answer.parts[0].root.text == "Direct message response" and answer.task_id is None,
                got,
            )

        # tasks/cancel of the waiting task, then again: -32002.
        canceled = await blocking.cancel_task(TaskIdParams(id=fresh_task.id))
        check("cancel -> canceled", canceled.status.state == TaskState.canceled, canceled.status.state)
        await expect_code("cancel finished task -> -32002", -32002, blocking.cancel_task(TaskIdParams(id=fresh_task.id)))

        # Error codes through the SDK.
        await expect_code("get unknown task -> -32001", -32001, blocking.get_task(TaskQueryParams(id="no-such-task")))
        await expect_code("message to finished task -> -32602", -32602, blocking.send_message(msg("again", task_id=task.id)))
        await expect_code(
            "push config of an unknown task -> -32001",
            -32001,
            blocking.set_task_callback(TaskPushNotificationConfig(task_id="no-such-task", push_notification_config=PushNotificationConfig(url="http://127.0.0.1:9/cb"))),
        )

        # Push notifications: a config on a waiting task, read back, then the reply's updates reach
        # the webhook as the task (what the 0.3 SDK's own sender posts).
        hook = Webhook()
        events = [e async for e in blocking.send_message(msg("Webhooks for agents"))]
        pushed, _ = events[-1]
        check("push: the task waits", pushed.status.state == TaskState.input_required, pushed.status.state)
        made = await blocking.set_task_callback(TaskPushNotificationConfig(task_id=pushed.id, push_notification_config=PushNotificationConfig(url=hook.url, token="tok-03")))
        check("push: set -> the config, its id the task's", made.push_notification_config.id == pushed.id and made.push_notification_config.url == hook.url, made)
        got = await blocking.get_task_callback(GetTaskPushNotificationConfigParams(id=pushed.id))
        check("push: get -> the config", got.push_notification_config.url == hook.url and got.push_notification_config.token == "tok-03", got)
        [e async for e in blocking.send_message(msg("Make it friendlier.", task_id=pushed.id, context_id=pushed.context_id))]
        posts = await hook.wait_for(lambda h, b: isinstance(b, dict) and b.get("id") == pushed.id and b.get("status", {}).get("state") == "completed")
        check("push: the webhook got the completed task", posts is not None, hook.posts)
        headers, body = [p for p in posts if p[1].get("status", {}).get("state") == "completed"][-1]
        check("push: the post carries the token", headers.get("x-a2a-notification-token") == "tok-03", headers)
        check("push: the post carries its journal seq", headers.get("x-a2a-event-id", "").isdigit(), headers)
        check("push: the body is a 0.3 Task", Task.model_validate(body).id == pushed.id, body)

        # Error codes the SDK cannot produce, over its own HTTP client.
        async def raw(body, content=None):
            r = await http.post(BASE + "/", content=content if content is not None else None, json=None if content is not None else body)
            return r.json()["error"]["code"]

        check("parse error -> -32700", await raw(None, content=b"{not json") == -32700)
        check("invalid request -> -32600", await raw({"jsonrpc": "1.0", "id": 1, "method": "tasks/get"}) == -32600)
        check("method not found -> -32601", await raw({"jsonrpc": "2.0", "id": 1, "method": "tasks/nope", "params": {}}) == -32601)
        check("negative historyLength -> -32602", await raw({"jsonrpc": "2.0", "id": 1, "method": "tasks/get", "params": {"id": task.id, "historyLength": -1}}) == -32602)
        empty = {"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {"message": {"role": "user", "parts": [], "messageId": "m", "kind": "message"}}}
        check("empty parts -> -32602", await raw(empty) == -32602)
        wrong = {"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {"message": "hello"}}
        check("wrong types -> -32602", await raw(wrong) == -32602)
        ext = {"jsonrpc": "2.0", "id": 1, "method": "agent/getAuthenticatedExtendedCard", "params": {}}
        check("extended card not configured -> -32007", await raw(ext) == -32007)
        big = await http.post(BASE + "/", content=b" " * (2 * 1024 * 1024))
        check("oversized body refused", big.status_code == 413, big.status_code)
        if TOKEN:
            async with httpx.AsyncClient(timeout=30) as anon:
                r = await anon.post(BASE + "/", json={"jsonrpc": "2.0", "id": 1, "method": "tasks/get", "params": {"id": task.id}})
                check("no token -> 401", r.status_code == 401, r.status_code)
    print("ALL PASSED", flush=True)


asyncio.run(main())
