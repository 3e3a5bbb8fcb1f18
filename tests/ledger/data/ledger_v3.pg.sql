--
-- PostgreSQL database dump
--

\restrict OkNk9EzaPWmKdlZdhbNsgLZcblojeetK6v0sgOGRWe00kNBCfeq9nivchzTIMjI

-- Dumped from database version 15.18 (Debian 15.18-0+deb12u1)
-- Dumped by pg_dump version 15.18 (Debian 15.18-0+deb12u1)

SET statement_timeout = 0;
SET lock_timeout = 0;
SET idle_in_transaction_session_timeout = 0;
SET client_encoding = 'UTF8';
SET standard_conforming_strings = on;
SELECT pg_catalog.set_config('search_path', '', false);
SET check_function_bodies = false;
SET xmloption = content;
SET client_min_messages = warning;
SET row_security = off;

SET default_tablespace = '';

SET default_table_access_method = heap;

--
-- Name: approvals; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.approvals (
    id text NOT NULL,
    run_id text NOT NULL,
    call_id text NOT NULL,
    principal text NOT NULL,
    tool text NOT NULL,
    arguments_json text NOT NULL,
    arguments_hash text NOT NULL,
    resource_version text,
    effects text NOT NULL,
    preview text NOT NULL,
    policy_version text,
    created_at double precision NOT NULL,
    expires_at double precision NOT NULL,
    status text NOT NULL,
    decided_by text,
    decided_at double precision,
    reason text,
    used_at double precision,
    used_by text,
    resumable integer DEFAULT 0 NOT NULL,
    decision_seq bigint
);


--
-- Name: calls; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.calls (
    run_id text NOT NULL,
    call_id text NOT NULL,
    tool text NOT NULL,
    tool_version text,
    principal text NOT NULL,
    arguments text NOT NULL,
    state text NOT NULL,
    stage text NOT NULL,
    request_hash text,
    idempotency_key text,
    decided_by text,
    message text NOT NULL,
    effects text NOT NULL,
    approval_id text,
    attempts integer DEFAULT 0 NOT NULL,
    reconciled integer DEFAULT 0 NOT NULL,
    created_at double precision NOT NULL,
    updated_at double precision NOT NULL,
    records text DEFAULT ''::text NOT NULL
);


--
-- Name: idempotency_keys; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.idempotency_keys (
    key text NOT NULL,
    request_hash text NOT NULL,
    run_id text NOT NULL,
    call_id text NOT NULL,
    attempt integer NOT NULL,
    expires_at double precision NOT NULL,
    status text,
    outcome_seq bigint
);


--
-- Name: journal; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.journal (
    seq bigint NOT NULL,
    at double precision NOT NULL,
    kind text NOT NULL,
    run_id text NOT NULL,
    call_id text,
    data text NOT NULL,
    prev_hash text NOT NULL,
    hash text NOT NULL
);


--
-- Name: journal_orphans; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.journal_orphans (
    run_id text NOT NULL,
    call_id text NOT NULL,
    seq bigint NOT NULL
);


--
-- Name: schema_version; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.schema_version (
    version integer NOT NULL,
    applied_at double precision NOT NULL
);


--
-- Data for Name: approvals; Type: TABLE DATA; Schema: public; Owner: -
--

INSERT INTO public.approvals VALUES ('apr_934272f2ad604b619288', 'run-v3-a', 'a3', 'alice', 'refund', '{"order_id":"o1","amount":5}', '031a3178fc9781f62bf672a25572f4a6c4e17876659a5fe84a3ef15d6a63eac3', NULL, '["spend:USD=5"]', 'refund({"order_id":"o1","amount":5})', '7994253c79dba081', 1796154805.2554133, 1796241205.2554133, 'used', 'maria', 1796154805.2760677, NULL, 1796154805.3089714, 'run-v3-a/a3', 1, 19);


--
-- Data for Name: calls; Type: TABLE DATA; Schema: public; Owner: -
--

INSERT INTO public.calls VALUES ('run-v3-a', 'a1', 'charge', 'ee9d627a8b657f7c', 'alice', '{"op":"op-a","amount":10}', 'ok', 'execute', '7207c46243ee5bb44f19d0fe7e9df6032f01118b82af9b52b50129b8bce77287', 'cg_8cef769988a7f70456afaaf1b4c76f32', 'allow charge', '', '["spend:USD=10"]', NULL, 1, 0, 1796154805.1112356, 1796154805.128172, '2,3,4');
INSERT INTO public.calls VALUES ('run-v3-a', 'a2', 'lookup', 'a1eaec7b0e6dcf43', 'alice', '{"order_id":"o1"}', 'ok', 'execute', 'd550717a0a009dbc7ba361bb33d1cfd4acf78d4628ccd8f062a52e0a72e73701', 'run-v3-a/a2', 'allow lookup', '', '["read:orders"]', NULL, 1, 0, 1796154805.1459982, 1796154805.1461086, '5,6,7');
INSERT INTO public.calls VALUES ('run-v3-b', 'b1', 'charge', 'ee9d627a8b657f7c', 'alice', '{"op":"op-b","amount":20}', 'ok', 'execute', '7667396db857ce0924b314bd705735fde1d0a02bd02171a9c37839d3b20179ec', 'cg_add59a4ea6ecaf0bf71ce6f8318262e1', 'allow charge', '', '["spend:USD=20"]', NULL, 1, 0, 1796154805.16201, 1796154805.1861997, '9,10,11');
INSERT INTO public.calls VALUES ('run-v3-b', 'b2', 'charge', 'ee9d627a8b657f7c', 'alice', '{"op":"op-a","amount":10}', 'ok', 'execute', '7207c46243ee5bb44f19d0fe7e9df6032f01118b82af9b52b50129b8bce77287', 'cg_8cef769988a7f70456afaaf1b4c76f32', 'allow charge', '', '["spend:USD=10"]', NULL, 0, 0, 1796154805.2023878, 1796154805.2024693, '12,13');
INSERT INTO public.calls VALUES ('run-v3-b', 'b3', 'lookup', 'a1eaec7b0e6dcf43', 'alice', '{"order_id":"o2"}', 'ok', 'execute', '43c57c16fdbc8764f71bc870b22df41e0adb6d8ed16294aad5fb4599366fe577', 'run-v3-b/b3', 'allow lookup', '', '["read:orders"]', NULL, 1, 0, 1796154805.211576, 1796154805.2116733, '14,15,16');
INSERT INTO public.calls VALUES ('run-v3-a', 'a3', 'refund', '9cdffd92c19efecc', 'alice', '{"order_id":"o1","amount":5}', 'ok', 'execute', '031a3178fc9781f62bf672a25572f4a6c4e17876659a5fe84a3ef15d6a63eac3', 'run-v3-a/a3', 'ask refund', '', '["spend:USD=5"]', 'apr_934272f2ad604b619288', 1, 0, 1796154805.3356094, 1796154805.3549514, '18,19,20,21,22,23');


--
-- Data for Name: idempotency_keys; Type: TABLE DATA; Schema: public; Owner: -
--

INSERT INTO public.idempotency_keys VALUES ('cg_8cef769988a7f70456afaaf1b4c76f32', '7207c46243ee5bb44f19d0fe7e9df6032f01118b82af9b52b50129b8bce77287', 'run-v3-a', 'a1', 1, 1796241205.1113343, 'ok', 4);
INSERT INTO public.idempotency_keys VALUES ('cg_add59a4ea6ecaf0bf71ce6f8318262e1', '7667396db857ce0924b314bd705735fde1d0a02bd02171a9c37839d3b20179ec', 'run-v3-b', 'b1', 1, 1796241205.1620896, 'ok', 11);
INSERT INTO public.idempotency_keys VALUES ('run-v3-a/a3', '031a3178fc9781f62bf672a25572f4a6c4e17876659a5fe84a3ef15d6a63eac3', 'run-v3-a', 'a3', 1, 1796241205.3356905, 'ok', 23);


--
-- Data for Name: journal; Type: TABLE DATA; Schema: public; Owner: -
--

INSERT INTO public.journal VALUES (1, 1796154805.093969, 'run.opened', 'run-v3-a', NULL, '{"actor":"alice"}', '0000000000000000000000000000000000000000000000000000000000000000', '29bf8395cedcedb89e6b55ea69280b94793c7be368881c0fc9e12b09bcbc8f88');
INSERT INTO public.journal VALUES (2, 1796154805.1173043, 'call.admitted', 'run-v3-a', 'a1', '{"actor":"alice","tool":"charge","tool_version":"ee9d627a8b657f7c","arguments":"{\"op\":\"op-a\",\"amount\":10}","stage":"policy","decided_by":"allow charge","effects":["spend:USD=10"],"approval_id":null,"message":"","request_hash":"7207c46243ee5bb44f19d0fe7e9df6032f01118b82af9b52b50129b8bce77287","idempotency_key":"cg_8cef769988a7f70456afaaf1b4c76f32","created_at":1796154805.1112356,"updated_at":1796154805.1112356}', '29bf8395cedcedb89e6b55ea69280b94793c7be368881c0fc9e12b09bcbc8f88', '1601ecaaf1e4fba3d1714ddb9068b2e1368dec68a6b4ab1d37e03f4f744d1658');
INSERT INTO public.journal VALUES (3, 1796154805.121982, 'attempt.started', 'run-v3-a', 'a1', '{"actor":"fixture-v3","attempt":1,"idempotency_key":"cg_8cef769988a7f70456afaaf1b4c76f32","request_hash":"7207c46243ee5bb44f19d0fe7e9df6032f01118b82af9b52b50129b8bce77287","tool_version":"ee9d627a8b657f7c","started_at":1796154805.1113343,"key_expires_at":1796241205.1113343,"side_effecting":true}', '1601ecaaf1e4fba3d1714ddb9068b2e1368dec68a6b4ab1d37e03f4f744d1658', 'cf03ae4f34cb6901de533b3e994f7bb44f8d80c1eff75c2fd6b1edb497f02474');
INSERT INTO public.journal VALUES (4, 1796154805.1294136, 'attempt.ok', 'run-v3-a', 'a1', '{"actor":"fixture-v3","attempt":1,"status":"ok","stage":"execute","error":null,"reconciled":false,"transaction_id":null,"evidence_id":"a1","content":"{\"charged\":10,\"op\":\"op-a\"}","finished_at":1796154805.128172,"idempotency_key":"cg_8cef769988a7f70456afaaf1b4c76f32"}', 'cf03ae4f34cb6901de533b3e994f7bb44f8d80c1eff75c2fd6b1edb497f02474', 'ab4e337cbb2e1a92b72fb37d6573e622e70334d0b60c6e44d8b18fc8f6e38386');
INSERT INTO public.journal VALUES (4611686018427387904, 0, '@head', '', NULL, '23', '', '311779d326071a7b97da46fc24b04e9836db1b4d8f2c71bb954d61476afa6067');
INSERT INTO public.journal VALUES (5, 1796154805.149765, 'call.admitted', 'run-v3-a', 'a2', '{"actor":"alice","tool":"lookup","tool_version":"a1eaec7b0e6dcf43","arguments":"{\"order_id\":\"o1\"}","stage":"policy","decided_by":"allow lookup","effects":["read:orders"],"approval_id":null,"message":"","request_hash":"d550717a0a009dbc7ba361bb33d1cfd4acf78d4628ccd8f062a52e0a72e73701","idempotency_key":"run-v3-a/a2","created_at":1796154805.1459982,"updated_at":1796154805.1459982}', 'ab4e337cbb2e1a92b72fb37d6573e622e70334d0b60c6e44d8b18fc8f6e38386', 'c5acf0d42c07ba89966370714c94024773db0b11bcc51e9c8eb958686219517b');
INSERT INTO public.journal VALUES (6, 1796154805.150199, 'attempt.started', 'run-v3-a', 'a2', '{"actor":"fixture-v3","attempt":1,"idempotency_key":"run-v3-a/a2","request_hash":"d550717a0a009dbc7ba361bb33d1cfd4acf78d4628ccd8f062a52e0a72e73701","tool_version":"a1eaec7b0e6dcf43","started_at":1796154805.1460702,"key_expires_at":1796241205.1460702,"side_effecting":false}', 'c5acf0d42c07ba89966370714c94024773db0b11bcc51e9c8eb958686219517b', '7bda8f8ed5e0970fcf2b5f983efd3ba62030a9d0d2fe57d47027c233e45d0b3a');
INSERT INTO public.journal VALUES (7, 1796154805.1502662, 'attempt.ok', 'run-v3-a', 'a2', '{"actor":"fixture-v3","attempt":1,"status":"ok","stage":"execute","error":null,"reconciled":false,"transaction_id":null,"evidence_id":"a2","content":"{\"order\":\"o1\"}","finished_at":1796154805.1461086,"idempotency_key":"run-v3-a/a2"}', '7bda8f8ed5e0970fcf2b5f983efd3ba62030a9d0d2fe57d47027c233e45d0b3a', 'fc4340129943ab5495625b99a7b43c5e562dbfca54f1242dd2ff48002bd85b22');
INSERT INTO public.journal VALUES (8, 1796154805.1572835, 'run.opened', 'run-v3-b', NULL, '{"actor":"alice"}', 'fc4340129943ab5495625b99a7b43c5e562dbfca54f1242dd2ff48002bd85b22', '53731d6b3da055cfaccf516225128d009b6773213b60464dfe74aa3f93aa17a2');
INSERT INTO public.journal VALUES (9, 1796154805.1692822, 'call.admitted', 'run-v3-b', 'b1', '{"actor":"alice","tool":"charge","tool_version":"ee9d627a8b657f7c","arguments":"{\"op\":\"op-b\",\"amount\":20}","stage":"policy","decided_by":"allow charge","effects":["spend:USD=20"],"approval_id":null,"message":"","request_hash":"7667396db857ce0924b314bd705735fde1d0a02bd02171a9c37839d3b20179ec","idempotency_key":"cg_add59a4ea6ecaf0bf71ce6f8318262e1","created_at":1796154805.16201,"updated_at":1796154805.16201}', '53731d6b3da055cfaccf516225128d009b6773213b60464dfe74aa3f93aa17a2', '90f5e26bd67e4a0993065e986cfbf5de36d80900d43395b397847f5b4adfb961');
INSERT INTO public.journal VALUES (10, 1796154805.1712272, 'attempt.started', 'run-v3-b', 'b1', '{"actor":"fixture-v3","attempt":1,"idempotency_key":"cg_add59a4ea6ecaf0bf71ce6f8318262e1","request_hash":"7667396db857ce0924b314bd705735fde1d0a02bd02171a9c37839d3b20179ec","tool_version":"ee9d627a8b657f7c","started_at":1796154805.1620896,"key_expires_at":1796241205.1620896,"side_effecting":true}', '90f5e26bd67e4a0993065e986cfbf5de36d80900d43395b397847f5b4adfb961', 'b524aa6c29e5df427df4d976b565dd8aff108d3ac260b16250f9043bbc7c26e0');
INSERT INTO public.journal VALUES (11, 1796154805.1878324, 'attempt.ok', 'run-v3-b', 'b1', '{"actor":"fixture-v3","attempt":1,"status":"ok","stage":"execute","error":null,"reconciled":false,"transaction_id":null,"evidence_id":"b1","content":"{\"charged\":20,\"op\":\"op-b\"}","finished_at":1796154805.1861997,"idempotency_key":"cg_add59a4ea6ecaf0bf71ce6f8318262e1"}', 'b524aa6c29e5df427df4d976b565dd8aff108d3ac260b16250f9043bbc7c26e0', 'dfe1f039402d8a34f648c4914f6404b7303f291cb93ed76b957d36d03e24fc6d');
INSERT INTO public.journal VALUES (12, 1796154805.203843, 'call.admitted', 'run-v3-b', 'b2', '{"actor":"alice","tool":"charge","tool_version":"ee9d627a8b657f7c","arguments":"{\"op\":\"op-a\",\"amount\":10}","stage":"policy","decided_by":"allow charge","effects":["spend:USD=10"],"approval_id":null,"message":"","request_hash":"7207c46243ee5bb44f19d0fe7e9df6032f01118b82af9b52b50129b8bce77287","idempotency_key":"cg_8cef769988a7f70456afaaf1b4c76f32","created_at":1796154805.2023878,"updated_at":1796154805.2023878}', 'dfe1f039402d8a34f648c4914f6404b7303f291cb93ed76b957d36d03e24fc6d', '474628212d1ccedd46d38c62c9374ceec098505ffba1508a0b46a247f52a50dc');
INSERT INTO public.journal VALUES (13, 1796154805.2064812, 'idempotency.replay', 'run-v3-b', 'b2', '{"actor":"fixture-v3","holder":["run-v3-a","a1"],"settled":"ok","stage":"execute","started_at":1796154805.2024693}', '474628212d1ccedd46d38c62c9374ceec098505ffba1508a0b46a247f52a50dc', '2c93785ec706026b58c2c2849ec29cd50f5091681bd2026f39dec6c89a16748c');
INSERT INTO public.journal VALUES (14, 1796154805.2215292, 'call.admitted', 'run-v3-b', 'b3', '{"actor":"alice","tool":"lookup","tool_version":"a1eaec7b0e6dcf43","arguments":"{\"order_id\":\"o2\"}","stage":"policy","decided_by":"allow lookup","effects":["read:orders"],"approval_id":null,"message":"","request_hash":"43c57c16fdbc8764f71bc870b22df41e0adb6d8ed16294aad5fb4599366fe577","idempotency_key":"run-v3-b/b3","created_at":1796154805.211576,"updated_at":1796154805.211576}', '2c93785ec706026b58c2c2849ec29cd50f5091681bd2026f39dec6c89a16748c', '2c76f709d599a410dddec6ef1fd72ec01f0d7329654494ea0fc140a37470f5d7');
INSERT INTO public.journal VALUES (15, 1796154805.2259521, 'attempt.started', 'run-v3-b', 'b3', '{"actor":"fixture-v3","attempt":1,"idempotency_key":"run-v3-b/b3","request_hash":"43c57c16fdbc8764f71bc870b22df41e0adb6d8ed16294aad5fb4599366fe577","tool_version":"a1eaec7b0e6dcf43","started_at":1796154805.2116401,"key_expires_at":1796241205.2116401,"side_effecting":false}', '2c76f709d599a410dddec6ef1fd72ec01f0d7329654494ea0fc140a37470f5d7', 'a617bff880ec5680f0741e179e530b0861684ae9f2fdbaadc15ed70b3af75089');
INSERT INTO public.journal VALUES (16, 1796154805.2260537, 'attempt.ok', 'run-v3-b', 'b3', '{"actor":"fixture-v3","attempt":1,"status":"ok","stage":"execute","error":null,"reconciled":false,"transaction_id":null,"evidence_id":"b3","content":"{\"order\":\"o2\"}","finished_at":1796154805.2116733,"idempotency_key":"run-v3-b/b3"}', 'a617bff880ec5680f0741e179e530b0861684ae9f2fdbaadc15ed70b3af75089', 'cb7f3eff676cd25c2550ca74bb3e8f0cddfe4b77c30451c7ab2bb77c6badc050');
INSERT INTO public.journal VALUES (17, 1796154805.2569194, 'approval.requested', 'run-v3-a', 'a3', '{"actor":"alice","approval_id":"apr_934272f2ad604b619288","tool":"refund","arguments":"{\"order_id\":\"o1\",\"amount\":5}","arguments_hash":"031a3178fc9781f62bf672a25572f4a6c4e17876659a5fe84a3ef15d6a63eac3","resource_version":null,"effects":["spend:USD=5"],"preview":"refund({\"order_id\":\"o1\",\"amount\":5})","policy_version":"7994253c79dba081","expires_at":1796241205.2554133,"created_at":1796154805.2554133,"resumable":true}', 'cb7f3eff676cd25c2550ca74bb3e8f0cddfe4b77c30451c7ab2bb77c6badc050', '5beb6c17a740dd99a8d3b6b4493842ae221ad9d185ec66db3e03b36c69cbb925');
INSERT INTO public.journal VALUES (18, 1796154805.2745132, 'call.pending', 'run-v3-a', 'a3', '{"actor":"alice","tool":"refund","tool_version":"9cdffd92c19efecc","arguments":"{\"order_id\":\"o1\",\"amount\":5}","stage":"approval","decided_by":"ask refund","effects":["spend:USD=5"],"approval_id":"apr_934272f2ad604b619288","message":"approval requested: refund({\"order_id\":\"o1\",\"amount\":5})","request_hash":"031a3178fc9781f62bf672a25572f4a6c4e17876659a5fe84a3ef15d6a63eac3","idempotency_key":null,"created_at":1796154805.2713132,"updated_at":1796154805.2713132}', '5beb6c17a740dd99a8d3b6b4493842ae221ad9d185ec66db3e03b36c69cbb925', 'ee17126c211b6dec76d36878ac1a3737677eb0454dad1b5ac6b1ebd20c0d61b2');
INSERT INTO public.journal VALUES (19, 1796154805.2765296, 'approval.approved', 'run-v3-a', 'a3', '{"actor":"maria","approval_id":"apr_934272f2ad604b619288","principal":"alice","expires_at":1796241205.2554133,"tool":"refund","arguments_hash":"031a3178fc9781f62bf672a25572f4a6c4e17876659a5fe84a3ef15d6a63eac3","resource_version":null,"policy_version":"7994253c79dba081","reason":null,"decided_at":1796154805.2760677}', 'ee17126c211b6dec76d36878ac1a3737677eb0454dad1b5ac6b1ebd20c0d61b2', '7b59ea81cf72c1568a1e0d58078a70fce1d16073df1fd396d423711e28e9ca84');
INSERT INTO public.journal VALUES (20, 1796154805.3295772, 'approval.used', 'run-v3-a', 'a3', '{"actor":"alice","approval_id":"apr_934272f2ad604b619288","decided_by":"maria","used_at":1796154805.3089714,"used_by":"run-v3-a/a3"}', '7b59ea81cf72c1568a1e0d58078a70fce1d16073df1fd396d423711e28e9ca84', 'eb46f8eac01d2e4a63e90b4be98cca7dcd3177f787bd55dc14a0d7c464511255');
INSERT INTO public.journal VALUES (21, 1796154805.3360682, 'call.admitted', 'run-v3-a', 'a3', '{"actor":"alice","tool":"refund","tool_version":"9cdffd92c19efecc","arguments":"{\"order_id\":\"o1\",\"amount\":5}","stage":"policy","decided_by":"ask refund","effects":["spend:USD=5"],"approval_id":"apr_934272f2ad604b619288","message":"","request_hash":"031a3178fc9781f62bf672a25572f4a6c4e17876659a5fe84a3ef15d6a63eac3","idempotency_key":"run-v3-a/a3","created_at":1796154805.3356094,"updated_at":1796154805.3356094}', 'eb46f8eac01d2e4a63e90b4be98cca7dcd3177f787bd55dc14a0d7c464511255', '71f8ff087e9b7e9ffa88444c1eab3a387239f990e6b105715c4984c6cdd4ddc4');
INSERT INTO public.journal VALUES (22, 1796154805.3368368, 'attempt.started', 'run-v3-a', 'a3', '{"actor":"fixture-v3","attempt":1,"idempotency_key":"run-v3-a/a3","request_hash":"031a3178fc9781f62bf672a25572f4a6c4e17876659a5fe84a3ef15d6a63eac3","tool_version":"9cdffd92c19efecc","started_at":1796154805.3356905,"key_expires_at":1796241205.3356905,"side_effecting":true}', '71f8ff087e9b7e9ffa88444c1eab3a387239f990e6b105715c4984c6cdd4ddc4', 'ce6f6b02b603ae53cdb508466ba3d1f5acc003572e6cbd6248976a17e0ced448');
INSERT INTO public.journal VALUES (23, 1796154805.3564882, 'attempt.ok', 'run-v3-a', 'a3', '{"actor":"fixture-v3","attempt":1,"status":"ok","stage":"execute","error":null,"reconciled":false,"transaction_id":null,"evidence_id":"a3","content":"{\"refunded\":5}","finished_at":1796154805.3549514,"idempotency_key":"run-v3-a/a3"}', 'ce6f6b02b603ae53cdb508466ba3d1f5acc003572e6cbd6248976a17e0ced448', '311779d326071a7b97da46fc24b04e9836db1b4d8f2c71bb954d61476afa6067');


--
-- Data for Name: journal_orphans; Type: TABLE DATA; Schema: public; Owner: -
--

INSERT INTO public.journal_orphans VALUES ('run-v3-a', '', 1);
INSERT INTO public.journal_orphans VALUES ('run-v3-b', '', 8);
INSERT INTO public.journal_orphans VALUES ('run-v3-a', 'a3', 17);


--
-- Data for Name: schema_version; Type: TABLE DATA; Schema: public; Owner: -
--

INSERT INTO public.schema_version VALUES (1, 1796154804.945945);
INSERT INTO public.schema_version VALUES (2, 1796154804.975203);
INSERT INTO public.schema_version VALUES (3, 1796154805.0251663);


--
-- Name: approvals approvals_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.approvals
    ADD CONSTRAINT approvals_pkey PRIMARY KEY (id);


--
-- Name: journal audit_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.journal
    ADD CONSTRAINT audit_pkey PRIMARY KEY (seq);


--
-- Name: calls calls_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.calls
    ADD CONSTRAINT calls_pkey PRIMARY KEY (run_id, call_id);


--
-- Name: idempotency_keys idempotency_keys_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.idempotency_keys
    ADD CONSTRAINT idempotency_keys_pkey PRIMARY KEY (key);


--
-- Name: journal_orphans journal_orphans_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.journal_orphans
    ADD CONSTRAINT journal_orphans_pkey PRIMARY KEY (run_id, call_id, seq);


--
-- Name: schema_version schema_version_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.schema_version
    ADD CONSTRAINT schema_version_pkey PRIMARY KEY (version);


--
-- Name: approvals_effect; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX approvals_effect ON public.approvals USING btree (principal, tool, arguments_hash);


--
-- Name: approvals_status; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX approvals_status ON public.approvals USING btree (status, created_at);


--
-- Name: calls_key; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX calls_key ON public.calls USING btree (idempotency_key);


--
-- PostgreSQL database dump complete
--

\unrestrict OkNk9EzaPWmKdlZdhbNsgLZcblojeetK6v0sgOGRWe00kNBCfeq9nivchzTIMjI

