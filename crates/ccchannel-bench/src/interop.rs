//! The `interop-responder` subcommand: the Noise NN responder (snow) that tests/test_transport.py
//! drives from the Python noiseprotocol package, to show the two implementations agree.

use std::io::{Read, Write};

/// A Noise NN responder on stdin/stdout for interoperability tests with another Noise implementation:
/// reads `u16 length || message 1`, writes `u16 length || message 2`, then writes one transport
/// message ("interop ok" encrypted with the responder's sending key) and the handshake hash (hex) on stderr.
pub fn interop_responder(cipher: &str) -> Result<(), String> {
    let name = format!("Noise_NN_25519_{cipher}_SHA256");
    let params = name.parse().map_err(|e: snow::Error| e.to_string())?;
    let mut responder = snow::Builder::new(params)
        .build_responder()
        .map_err(|e| e.to_string())?;
    let mut stdin = std::io::stdin().lock();
    let mut stdout = std::io::stdout().lock();
    let mut length = [0u8; 2];
    stdin.read_exact(&mut length).map_err(|e| e.to_string())?;
    let mut message = vec![0u8; u16::from_be_bytes(length) as usize];
    stdin.read_exact(&mut message).map_err(|e| e.to_string())?;
    let mut payload = [0u8; 1024];
    responder
        .read_message(&message, &mut payload)
        .map_err(|e| e.to_string())?;
    let mut out = [0u8; 1024];
    let n = responder.write_message(b"", &mut out).map_err(|e| e.to_string())?;
    stdout
        .write_all(&(n as u16).to_be_bytes())
        .and_then(|_| stdout.write_all(&out[..n]))
        .map_err(|e| e.to_string())?;
    let hash = hex::encode(responder.get_handshake_hash());
    let mut transport = responder.into_transport_mode().map_err(|e| e.to_string())?;
    let n = transport
        .write_message(b"interop ok", &mut out)
        .map_err(|e| e.to_string())?;
    stdout
        .write_all(&(n as u16).to_be_bytes())
        .and_then(|_| stdout.write_all(&out[..n]))
        .map_err(|e| e.to_string())?;
    stdout.flush().map_err(|e| e.to_string())?;
    eprintln!("{hash}");
    Ok(())
}
