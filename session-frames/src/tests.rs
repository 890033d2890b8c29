use crate::*;

fn spawn() -> Message {
    Message::Spawn(Spawn {
        argv: vec![b"/bin/sh".to_vec(), b"-c".to_vec(), b"echo hi".to_vec()],
        env: vec![
            (b"PATH".to_vec(), b"/usr/bin:/bin".to_vec()),
            (b"EMPTY".to_vec(), Vec::new()),
        ],
        cwd: b"/workspace".to_vec(),
        stdin: true,
    })
}

fn every_message() -> Vec<Message> {
    vec![
        spawn(),
        Message::Stdin(b"bytes \0 with a NUL".to_vec()),
        Message::Stdin(Vec::new()),
        Message::StdinEnd,
        Message::Signal(Signal::Term),
        Message::Credit {
            stream: Stream::Stderr,
            bytes: 65_536,
        },
        Message::Spawned { pid: 42 },
        Message::SpawnFailed {
            errno: 2,
            message: b"/bin/nope".to_vec(),
        },
        Message::Output {
            stream: Stream::Stdout,
            bytes: vec![0xff; 1000],
        },
        Message::OutputEnd {
            stream: Stream::Stdout,
        },
        Message::Exit(Exit::Exited(-1)),
        Message::Exit(Exit::Signaled(9)),
        Message::Refused {
            message: b"channel 3 is in use".to_vec(),
        },
    ]
}

fn frame_of(channel: u32, message: &Message) -> Vec<u8> {
    let mut out = Vec::new();
    encode(channel, message, &mut out);
    out
}

#[test]
fn every_message_round_trips_through_the_decoder_fed_byte_by_byte() {
    let messages = every_message();
    let mut wire = Vec::new();
    for (channel, message) in messages.iter().enumerate() {
        encode(channel as u32, message, &mut wire);
    }
    let mut decoder = Decoder::new();
    let mut decoded = Vec::new();
    for byte in &wire {
        assert!(decoder.wanted() >= 1);
        decoder.push(std::slice::from_ref(byte));
        while let Some(frame) = decoder.next_frame().expect("well-formed") {
            let message = Message::decode(&frame).expect("decodes");
            // One encoding per message: encoding it again gives the frame's bytes.
            assert_eq!(frame_of(frame.channel, &message), {
                let mut bytes = Vec::new();
                frame.write(&mut bytes);
                bytes
            });
            decoded.push((frame.channel, message));
        }
    }
    assert_eq!(decoder.pending(), 0);
    let expected: Vec<_> = messages
        .into_iter()
        .enumerate()
        .map(|(c, m)| (c as u32, m))
        .collect();
    assert_eq!(decoded, expected);
}

#[test]
fn next_message_gives_what_next_frame_and_decode_give_in_pieces_of_any_size() {
    let messages = every_message();
    let mut wire = Vec::new();
    for (channel, message) in messages.iter().enumerate() {
        encode(channel as u32, message, &mut wire);
    }
    let expected: Vec<_> = messages
        .into_iter()
        .enumerate()
        .map(|(c, m)| (c as u32, m))
        .collect();
    for piece in [1, 7, 12, 13, 64, wire.len()] {
        let mut decoder = Decoder::new();
        let mut decoded = Vec::new();
        for chunk in wire.chunks(piece) {
            decoder.push(chunk);
            while let Some(message) = decoder.next_message().expect("well-formed") {
                decoded.push(message);
            }
        }
        assert_eq!(decoder.pending(), 0);
        assert_eq!(decoded, expected, "pieces of {piece} bytes");
    }
}

#[test]
fn next_message_fails_on_a_malformed_payload_and_stays_failed() {
    let mut wire = Vec::new();
    // An output frame whose stream byte is neither stdout nor stderr, then a good one.
    wire.extend_from_slice(&crate::frame::header(Kind::Output, 3, 2));
    wire.extend_from_slice(&[9, b'x']);
    encode(
        3,
        &Message::OutputEnd {
            stream: Stream::Stdout,
        },
        &mut wire,
    );
    let mut decoder = Decoder::new();
    decoder.push(&wire);
    let first = decoder.next_message();
    assert!(
        matches!(
            first,
            Err(FrameError::Payload {
                kind: Kind::Output,
                ..
            })
        ),
        "{first:?}"
    );
    assert_eq!(decoder.next_message(), first);
}

#[test]
fn wanted_asks_for_the_header_then_exactly_the_payload() {
    let wire = frame_of(
        7,
        &Message::Output {
            stream: Stream::Stdout,
            bytes: vec![1; 100],
        },
    );
    let mut decoder = Decoder::new();
    assert_eq!(decoder.wanted(), HEADER_LEN);
    decoder.push(&wire[..HEADER_LEN]);
    assert_eq!(decoder.wanted(), 101);
    assert_eq!(decoder.next_frame(), Ok(None));
    decoder.push(&wire[HEADER_LEN..]);
    assert!(decoder.next_frame().expect("whole").is_some());
    assert_eq!(decoder.wanted(), HEADER_LEN);
}

#[test]
fn a_malformed_header_is_named_and_the_stream_stays_failed() {
    let good = frame_of(1, &Message::StdinEnd);
    let cases: Vec<(Vec<u8>, FrameError)> = vec![
        (
            {
                let mut b = good.clone();
                b[0] = 0x7f;
                b
            },
            FrameError::UnknownKind(0x7f),
        ),
        (
            {
                let mut b = good.clone();
                b[1] = 2;
                b
            },
            FrameError::Version(2),
        ),
        (
            {
                let mut b = good.clone();
                b[3] = 1;
                b
            },
            FrameError::Flags(1),
        ),
        (
            {
                let mut b = good.clone();
                b[8..12].copy_from_slice(&u32::MAX.to_be_bytes());
                b
            },
            FrameError::TooLong {
                len: u64::from(u32::MAX),
                max: MAX_PAYLOAD,
            },
        ),
    ];
    for (bytes, expected) in cases {
        let mut decoder = Decoder::new();
        decoder.push(&bytes);
        assert_eq!(decoder.next_frame(), Err(expected.clone()));
        decoder.push(&good);
        assert_eq!(
            decoder.next_frame(),
            Err(expected),
            "nothing after a malformed frame is trusted"
        );
    }
}

#[test]
fn malformed_payloads_name_their_field() {
    let bad = |kind: Kind, payload: Vec<u8>| {
        Message::decode(&Frame {
            kind,
            channel: 1,
            payload,
        })
    };
    let field = |result: Result<Message, FrameError>| match result {
        Err(FrameError::Payload { what, .. }) => what,
        other => panic!("a payload error, not {other:?}"),
    };
    let spawn_bytes = |edit: &dyn Fn(&mut Spawn)| {
        let Message::Spawn(mut s) = spawn() else {
            unreachable!()
        };
        edit(&mut s);
        let wire = frame_of(1, &Message::Spawn(s));
        wire[HEADER_LEN..].to_vec()
    };
    assert_eq!(
        field(bad(Kind::Spawn, spawn_bytes(&|s| s.argv.clear()))),
        "argv"
    );
    assert_eq!(
        field(bad(Kind::Spawn, spawn_bytes(&|s| s.argv[0].clear()))),
        "argv"
    );
    assert_eq!(
        field(bad(
            Kind::Spawn,
            spawn_bytes(&|s| s.argv[1] = b"a\0b".to_vec())
        )),
        "argv"
    );
    assert_eq!(
        field(bad(
            Kind::Spawn,
            spawn_bytes(&|s| s.env[0].0 = b"A=B".to_vec())
        )),
        "env"
    );
    assert_eq!(
        field(bad(Kind::Spawn, spawn_bytes(&|s| s.env[0].0.clear()))),
        "env"
    );
    assert_eq!(
        field(bad(
            Kind::Spawn,
            spawn_bytes(&|s| s.cwd = b"relative".to_vec())
        )),
        "cwd"
    );
    let mut trailing = spawn_bytes(&|_| {});
    trailing.push(0);
    assert_eq!(field(bad(Kind::Spawn, trailing)), "length");
    let mut flag = spawn_bytes(&|_| {});
    flag[0] = 2;
    assert_eq!(field(bad(Kind::Spawn, flag)), "stdin flag");
    // A forged count larger than the payload could hold is refused before anything is reserved.
    let mut forged = vec![1];
    forged.extend_from_slice(&u32::MAX.to_be_bytes());
    assert_eq!(field(bad(Kind::Spawn, forged)), "argv");
    assert_eq!(field(bad(Kind::Signal, vec![31])), "signal");
    assert_eq!(field(bad(Kind::Signal, vec![])), "signal");
    assert_eq!(field(bad(Kind::Credit, vec![3, 0, 0, 0, 1])), "stream");
    assert_eq!(field(bad(Kind::Exit, vec![2, 0, 0, 0, 0])), "exit");
    assert_eq!(field(bad(Kind::StdinEnd, vec![0])), "length");
    assert_eq!(field(bad(Kind::Spawned, vec![0, 0])), "pid");
    let file = |component: &[u8]| {
        let mut payload = vec![0, 0];
        payload.extend_from_slice(&1u32.to_be_bytes());
        payload.extend_from_slice(&(component.len() as u32).to_be_bytes());
        payload.extend_from_slice(component);
        payload
    };
    for hostile in [&b".."[..], b".", b"", b"a/b", b"a\0b", &[b'x'; 256][..]] {
        assert_eq!(field(bad(Kind::File, file(hostile))), "path", "{hostile:?}");
    }
    assert!(Message::decode(&Frame {
        kind: Kind::File,
        channel: 1,
        payload: file(b"ok")
    })
    .is_ok());
    assert_eq!(field(bad(Kind::File, vec![9, 0, 0, 0, 0, 0])), "op");
    assert_eq!(field(bad(Kind::File, vec![0, 3, 0, 0, 0, 0])), "root");
}

#[test]
fn signals_are_the_contracts_names_and_nothing_else() {
    for name in [
        "SIGTERM", "SIGKILL", "SIGINT", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2",
    ] {
        let signal = Signal::from_name(name).expect(name);
        assert_eq!(Signal::from_number(signal as u8), Some(signal));
    }
    assert_eq!(Signal::from_name("SIGSTOP"), None);
    assert_eq!(Signal::from_number(19), None);
}

#[test]
fn an_output_prefix_and_its_bytes_are_the_output_frame_encode_makes() {
    for (channel, stream, len) in [
        (1, Stream::Stdout, 0),
        (7, Stream::Stderr, 4096),
        (u32::MAX, Stream::Stdout, MAX_PAYLOAD - 1),
    ] {
        let bytes = vec![0x5a; len];
        let mut sent = output_prefix(channel, stream, len).to_vec();
        sent.extend_from_slice(&bytes);
        assert_eq!(sent, frame_of(channel, &Message::Output { stream, bytes }));
    }
}
