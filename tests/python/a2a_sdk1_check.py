"""The official A2A Python SDK 1.x (A2A 1.0) drives a `radkit serve --default-skill conformance`
server over JSON-RPC, HTTP+JSON and gRPC: the card, a streamed send, the "ask" round trip with get
(historyLength), subscribe, blocking and returnImmediately sends, list with pagination, cancel,
push-notification config CRUD (paged list) with the task's updates delivered to a local webhook (the
server runs with --push-allow-private), and errors as the SDK's typed errors (TaskNotFoundError,
InvalidParamsError). Prints ALL PASSED when every check held.

Usage: python a2a_sdk1_check.py <base url>
"""

import asyncio
import sys
import traceback
from urllib.parse import urlparse

import grpc

import a2a.types as T
from a2a.client import ClientConfig, create_client
from a2a.utils.errors import InvalidParamsError, TaskNotFoundError
from google.protobuf import json_format

from webhook import Webhook

BASE = sys.argv[1].rstrip("/")
FAILED = []
HOOK = None


def check(what, ok, detail=""):
    print(("ok   " if ok else "FAIL ") + what + (f" ({detail})" if detail and not ok else ""))
    if not ok:
        FAILED.append(what)


def user(message_id, text, task_id=None):
    m = T.Message(message_id=message_id, role=T.Role.ROLE_USER, parts=[T.Part(text=text)])
    if task_id:
        m.task_id = task_id
    return m


def grpc_channel(url):
    # The card's GRPC interface is the server's host:port (HTTP/2 on the same port), a gRPC target.
    return grpc.aio.insecure_channel(urlparse(url).netloc if "://" in url else url)


async def drive(binding):
    client = await create_client(
        BASE,
        client_config=ClientConfig(
            supported_protocol_bindings=[binding], streaming=True, grpc_channel_factory=grpc_channel
        ),
    )
    tag = binding
    # A streamed send of other text: working, an artifact in two chunks, completed.
    events = [e async for e in client.send_message(T.SendMessageRequest(message=user(f"sdk1-{tag}-echo", "hello")))]
    kinds = [e.WhichOneof("payload") for e in events]
    check(f"{tag}: the stream opens with the task", kinds[:1] == ["task"], kinds)
    chunks = [e.artifact_update for e in events if e.HasField("artifact_update")]
    # The opening task is the task as it is when the stream opens: on a busy machine the first chunk
    # can already be in it rather than an event of its own. Either way there are two pieces, the last
    # an appended last chunk.
    opening = [p for a in events[0].task.artifacts for p in a.parts] if kinds[:1] == ["task"] else []
    pieces = len(opening) + sum(len(c.artifact.parts) for c in chunks)
    check(f"{tag}: two artifact chunks, the second appended and last", pieces == 2 and chunks and chunks[-1].append and chunks[-1].last_chunk, (opening, chunks))
    last = events[-1]
    check(f"{tag}: the stream ends completed", last.HasField("status_update") and last.status_update.status.state == T.TaskState.TASK_STATE_COMPLETED, last)

    # "ask": input-required, then the reply completes it with answer.txt.
    asked = [e async for e in client.send_message(T.SendMessageRequest(message=user(f"sdk1-{tag}-ask", "ask me")))]
    task_id = asked[0].task.id
    got = await client.get_task(T.GetTaskRequest(id=task_id, history_length=1))
    check(f"{tag}: get shows input-required", got.status.state == T.TaskState.TASK_STATE_INPUT_REQUIRED, got.status)
    check(f"{tag}: get honours historyLength", len(got.history) == 1, len(got.history))
    answered = [e async for e in client.send_message(T.SendMessageRequest(message=user(f"sdk1-{tag}-reply", "forty-two", task_id)))]
    names = [e.artifact_update.artifact.name for e in answered if e.HasField("artifact_update")]
    names += [a.name for e in answered if e.HasField("task") for a in e.task.artifacts]
    check(f"{tag}: the reply completes with answer.txt", "answer.txt" in names, names)

    # Subscribing to a task that waits for input: the task as it is, then (a 1.0 subscription follows
    # the task to its end) what a reply sent meanwhile causes, ending with the completion.
    waiting = [e async for e in client.send_message(T.SendMessageRequest(message=user(f"sdk1-{tag}-sub", "ask to subscribe")))]
    sub_id = waiting[0].task.id
    subscription = client.subscribe(T.SubscribeToTaskRequest(id=sub_id))
    first = await subscription.__anext__()
    check(
        f"{tag}: subscribe opens with the waiting task",
        first.HasField("task") and first.task.status.state == T.TaskState.TASK_STATE_INPUT_REQUIRED,
        first,
    )
    [e async for e in client.send_message(T.SendMessageRequest(message=user(f"sdk1-{tag}-sub-reply", "yes", sub_id)))]
    rest = [e async for e in subscription]
    check(
        f"{tag}: the subscription ends with the completion the reply caused",
        bool(rest) and rest[-1].HasField("status_update") and rest[-1].status_update.status.state == T.TaskState.TASK_STATE_COMPLETED,
        rest,
    )

    # Without streaming: SendMessage waits for the task to settle, or returns at once when polling.
    for polling in [False, True]:
        plain = await create_client(
            BASE,
            client_config=ClientConfig(
                supported_protocol_bindings=[binding], streaming=False, polling=polling, grpc_channel_factory=grpc_channel
            ),
        )
        sent = [e async for e in plain.send_message(T.SendMessageRequest(message=user(f"sdk1-{tag}-plain-{polling}", "plain")))]
        state = sent[0].task.status.state if len(sent) == 1 and sent[0].HasField("task") else None
        if polling:
            check(f"{tag}: returnImmediately answers before the task ends", state in (T.TaskState.TASK_STATE_SUBMITTED, T.TaskState.TASK_STATE_WORKING), sent)
        else:
            check(f"{tag}: a blocking send answers the completed task", state == T.TaskState.TASK_STATE_COMPLETED, sent)
        await plain.close()

    # A direct message answer (the conformance skill's tck-message-response): one Message, no task,
    # with and without streaming.
    for streaming in [False, True]:
        direct = await create_client(
            BASE,
            client_config=ClientConfig(
                supported_protocol_bindings=[binding], streaming=streaming, grpc_channel_factory=grpc_channel
            ),
        )
        got = [e async for e in direct.send_message(T.SendMessageRequest(message=user(f"tck-message-response-sdk1-{tag}-{streaming}", "x")))]
        answer = got[0].message if len(got) == 1 and got[0].HasField("message") else None
        check(
            f"{tag}: a direct answer is one Message (streaming={streaming})",
            answer is not None and answer.parts[0].text == "Direct message response" and not answer.task_id,
            got,
        )
        await direct.close()

    # List with pagination, then cancel a waiting task, then an error.
    page = await client.list_tasks(T.ListTasksRequest(page_size=1))
    check(f"{tag}: list pages", len(page.tasks) == 1 and page.next_page_token != "" and page.total_size >= 2, page)
    nxt = await client.list_tasks(T.ListTasksRequest(page_size=1, page_token=page.next_page_token))
    check(f"{tag}: the next page is another task", len(nxt.tasks) == 1 and nxt.tasks[0].id != page.tasks[0].id)
    waiting = [e async for e in client.send_message(T.SendMessageRequest(message=user(f"sdk1-{tag}-cancel", "ask again")))]
    canceled = await client.cancel_task(T.CancelTaskRequest(id=waiting[0].task.id))
    check(f"{tag}: cancel", canceled.status.state == T.TaskState.TASK_STATE_CANCELED, canceled.status)
    await push(client, tag)
    # Errors come back as the SDK's typed errors on every binding: each carries its ErrorInfo reason.
    try:
        await client.get_task(T.GetTaskRequest(id="no-such-task"))
        check(f"{tag}: an unknown task is TaskNotFoundError", False)
    except TaskNotFoundError:
        check(f"{tag}: an unknown task is TaskNotFoundError", True)
    except Exception as e:
        check(f"{tag}: an unknown task is TaskNotFoundError", False, repr(e))
    empty = T.Message(message_id=f"sdk1-{tag}-empty", role=T.Role.ROLE_USER)
    try:
        [e async for e in client.send_message(T.SendMessageRequest(message=empty))]
        check(f"{tag}: a message without parts is InvalidParamsError", False)
    except InvalidParamsError:
        check(f"{tag}: a message without parts is InvalidParamsError", True)
    except Exception as e:
        check(f"{tag}: a message without parts is InvalidParamsError", False, repr(e))
    await client.close()


async def push(client, tag):
    """Push-config CRUD on a waiting task, then its updates at the webhook."""
    waiting = [e async for e in client.send_message(T.SendMessageRequest(message=user(f"sdk1-{tag}-push", "ask push")))]
    task_id = waiting[0].task.id
    hook_id, spare_id = f"hook-{tag}", f"spare-{tag}"
    made = await client.create_task_push_notification_config(T.TaskPushNotificationConfig(
        task_id=task_id, id=hook_id, url=HOOK.url, token=f"tok-{tag}",
        authentication=T.AuthenticationInfo(scheme="Bearer", credentials="cred")))
    check(f"{tag}: push config created", made.id == hook_id and made.url == HOOK.url and made.task_id == task_id, made)
    got = await client.get_task_push_notification_config(T.GetTaskPushNotificationConfigRequest(task_id=task_id, id=hook_id))
    check(f"{tag}: push config read back", got.url == HOOK.url and got.token == f"tok-{tag}", got)
    await client.create_task_push_notification_config(T.TaskPushNotificationConfig(task_id=task_id, id=spare_id, url=HOOK.url))
    page = await client.list_task_push_notification_configs(T.ListTaskPushNotificationConfigsRequest(task_id=task_id, page_size=1))
    check(f"{tag}: push configs list in pages", len(page.configs) == 1 and page.next_page_token != "", page)
    nxt = await client.list_task_push_notification_configs(T.ListTaskPushNotificationConfigsRequest(task_id=task_id, page_size=1, page_token=page.next_page_token))
    check(f"{tag}: the next page is the other config", len(nxt.configs) == 1 and nxt.configs[0].id != page.configs[0].id, nxt)
    await client.delete_task_push_notification_config(T.DeleteTaskPushNotificationConfigRequest(task_id=task_id, id=spare_id))
    left = await client.list_task_push_notification_configs(T.ListTaskPushNotificationConfigsRequest(task_id=task_id))
    check(f"{tag}: delete removes the config", [c.id for c in left.configs] == [hook_id], left)
    [e async for e in client.send_message(T.SendMessageRequest(message=user(f"sdk1-{tag}-push-reply", "yes", task_id)))]

    def completed(h, b):
        return h.get("x-a2a-task-id") == task_id and b.get("statusUpdate", {}).get("status", {}).get("state") == "TASK_STATE_COMPLETED"

    posts = await HOOK.wait_for(completed)
    check(f"{tag}: the webhook got the completed update", posts is not None, HOOK.posts)
    mine = [(h, b) for h, b in posts or [] if h.get("x-a2a-task-id") == task_id]
    parsed = [json_format.ParseDict(b, T.StreamResponse()) for _, b in mine]
    check(f"{tag}: every post is a StreamResponse", all(p.WhichOneof("payload") for p in parsed), mine)
    seqs = [int(h["x-a2a-event-id"]) for h, _ in mine]
    check(f"{tag}: posts carry increasing journal seqs", seqs == sorted(set(seqs)), seqs)
    check(f"{tag}: posts carry token and authorization", all(h.get("x-a2a-notification-token") == f"tok-{tag}" and h.get("authorization") == "Bearer cred" for h, _ in mine), mine)


async def main():
    global HOOK
    HOOK = Webhook()
    for binding in ["JSONRPC", "HTTP+JSON", "GRPC"]:
        try:
            await drive(binding)
        except Exception:
            traceback.print_exc()
            FAILED.append(f"{binding}: raised")
    print("ALL PASSED" if not FAILED else f"FAILED: {FAILED}")
    sys.exit(1 if FAILED else 0)


asyncio.run(main())
